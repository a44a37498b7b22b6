package mysqlproto

import (
	"encoding/binary"
	"fmt"
)

// OK is a decoded OK packet (or the OK that ends a result set when
// CLIENT_DEPRECATE_EOF is on, whose header byte is 0xfe).
type OK struct {
	AffectedRows uint64
	LastInsertID uint64
	Status       uint16
	Warnings     uint16
	Info         []byte
	// SessionState is the raw session-state-change block (the lenenc string
	// after Info), present when the server set ServerSessionStateChanged.
	SessionState []byte
	// Tail: bytes follow the warnings (Info or session state).
	Tail    bool
	infoEnd int
}

// ParseOK decodes an OK packet payload. sessionTrack says whether
// CLIENT_SESSION_TRACK was negotiated on the connection it came from.
func ParseOK(p []byte, sessionTrack bool) (OK, bool) {
	var ok OK
	if len(p) < 1 {
		return ok, false
	}
	pos := 1
	var good bool
	if ok.AffectedRows, pos, good = ReadLenEncInt(p, pos); !good {
		return ok, false
	}
	if ok.LastInsertID, pos, good = ReadLenEncInt(p, pos); !good {
		return ok, false
	}
	if pos+4 > len(p) {
		// Old servers may omit status and warnings.
		ok.infoEnd = len(p)
		return ok, pos == len(p)
	}
	ok.Status = binary.LittleEndian.Uint16(p[pos:])
	ok.Warnings = binary.LittleEndian.Uint16(p[pos+2:])
	pos += 4
	if pos >= len(p) {
		ok.infoEnd = pos
		return ok, true
	}
	ok.Tail = true
	if !sessionTrack {
		ok.Info = p[pos:]
		ok.infoEnd = len(p)
		return ok, true
	}
	if ok.Info, pos, good = ReadLenEncString(p, pos); !good {
		return ok, false
	}
	ok.infoEnd = pos
	if ok.Status&ServerSessionStateChanged != 0 {
		if ok.SessionState, pos, good = ReadLenEncString(p, pos); !good {
			return ok, false
		}
	}
	return ok, true
}

// StripSessionState rewrites an OK payload parsed from a session-tracking
// connection into the form a client without CLIENT_SESSION_TRACK expects:
// status without ServerSessionStateChanged and Info as a plain string.
// It appends the result to dst.
func StripSessionState(dst []byte, p []byte, ok OK) []byte {
	// Header and the two integers are unchanged.
	pos := 1
	_, pos, _ = ReadLenEncInt(p, pos)
	_, pos, _ = ReadLenEncInt(p, pos)
	dst = append(dst, p[:pos]...)
	if pos+4 > len(p) {
		return append(dst, p[pos:]...)
	}
	st := ok.Status &^ ServerSessionStateChanged
	dst = binary.LittleEndian.AppendUint16(dst, st)
	dst = binary.LittleEndian.AppendUint16(dst, ok.Warnings)
	return append(dst, ok.Info...)
}

// EOF is a decoded classic EOF packet.
type EOF struct {
	Warnings uint16
	Status   uint16
}

// IsEOF reports whether p is a classic EOF packet (0xfe, shorter than 9 bytes).
func IsEOF(p []byte) bool { return len(p) > 0 && p[0] == EOFPacket && len(p) < 9 }

// ParseEOF decodes an EOF packet payload.
func ParseEOF(p []byte) EOF {
	if len(p) < 5 {
		return EOF{}
	}
	return EOF{Warnings: binary.LittleEndian.Uint16(p[1:]), Status: binary.LittleEndian.Uint16(p[3:])}
}

// SQLError is a MySQL error as a client sees it.
type SQLError struct {
	Code    uint16
	State   string // SQLSTATE, 5 characters
	Message string
}

func (e *SQLError) Error() string {
	return fmt.Sprintf("ERROR %d (%s): %s", e.Code, e.State, e.Message)
}

// NewError builds an SQLError with a formatted message.
func NewError(code uint16, state, format string, args ...any) *SQLError {
	return &SQLError{Code: code, State: state, Message: fmt.Sprintf(format, args...)}
}

// ParseErr decodes an ERR packet payload (CLIENT_PROTOCOL_41 form).
func ParseErr(p []byte) *SQLError {
	e := &SQLError{State: "HY000"}
	if len(p) < 3 {
		e.Message = "malformed error packet"
		return e
	}
	e.Code = binary.LittleEndian.Uint16(p[1:])
	rest := p[3:]
	if len(rest) >= 6 && rest[0] == '#' {
		e.State = string(rest[1:6])
		rest = rest[6:]
	}
	e.Message = string(rest)
	return e
}

// AppendErr appends the payload of an ERR packet for e.
func AppendErr(dst []byte, e *SQLError) []byte {
	dst = append(dst, ErrPacket, byte(e.Code), byte(e.Code>>8), '#')
	st := e.State
	if len(st) != 5 {
		st = "HY000"
	}
	dst = append(dst, st...)
	return append(dst, e.Message...)
}

// AppendOK appends the payload of a plain OK packet.
func AppendOK(dst []byte, affected, lastID uint64, status, warnings uint16) []byte {
	dst = append(dst, OKPacket)
	dst = AppendLenEncInt(dst, affected)
	dst = AppendLenEncInt(dst, lastID)
	dst = binary.LittleEndian.AppendUint16(dst, status)
	return binary.LittleEndian.AppendUint16(dst, warnings)
}

// AppendEOF appends a classic EOF payload.
func AppendEOF(dst []byte, status, warnings uint16) []byte {
	dst = append(dst, EOFPacket)
	dst = binary.LittleEndian.AppendUint16(dst, warnings)
	return binary.LittleEndian.AppendUint16(dst, status)
}

// SessionChange is one entry of an OK packet's session state block.
type SessionChange struct {
	Type  byte
	Name  []byte // variable name (system variables), schema name, GTIDs, or state
	Value []byte // variable value (system variables only)
}

// EachSessionChange calls fn for every entry of a session state block.
// The slices alias block.
func EachSessionChange(block []byte, fn func(SessionChange)) error {
	pos := 0
	for pos < len(block) {
		typ := block[pos]
		data, next, ok := ReadLenEncString(block, pos+1)
		if !ok {
			return fmt.Errorf("%w: session state entry", ErrMalformed)
		}
		pos = next
		ch := SessionChange{Type: typ}
		switch typ {
		case SessionTrackSystemVariables:
			name, p, ok := ReadLenEncString(data, 0)
			if !ok {
				return fmt.Errorf("%w: session variable name", ErrMalformed)
			}
			val, _, ok := ReadLenEncString(data, p)
			if !ok {
				return fmt.Errorf("%w: session variable value", ErrMalformed)
			}
			ch.Name, ch.Value = name, val
		case SessionTrackSchema, SessionTrackStateChange, SessionTrackTransactionCharacteristics, SessionTrackTransactionState:
			v, _, ok := ReadLenEncString(data, 0)
			if !ok {
				return fmt.Errorf("%w: session state value", ErrMalformed)
			}
			ch.Name = v
		case SessionTrackGTIDs:
			// encoding specification byte, then lenenc GTID string
			if len(data) > 0 {
				v, _, ok := ReadLenEncString(data, 1)
				if ok {
					ch.Name = v
				}
			}
		default:
			ch.Name = data
		}
		fn(ch)
	}
	return nil
}

// NullCell in a row given to WriteTextResult stands for SQL NULL.
const NullCell = "\x00NULL\x00"

// WriteTextResult writes a complete text-protocol result set of string
// columns (VARCHAR, utf8mb4) as a server would, starting at c.Seq: the
// column count, the definitions, an EOF unless deprecateEOF, the rows
// (NullCell for NULL) and the terminator with status. Test servers use it.
func WriteTextResult(c *Conn, cols []string, rows [][]string, status uint16, deprecateEOF bool) error {
	var buf []byte
	put := func(p []byte) error { return c.WritePacket(p) }
	if err := put(AppendLenEncInt(buf[:0], uint64(len(cols)))); err != nil {
		return err
	}
	for _, name := range cols {
		d := buf[:0]
		for _, s := range []string{"def", "", "", "", name, name} {
			d = AppendLenEncString(d, []byte(s))
		}
		// Fixed fields: length 0x0c, charset utf8mb4_general_ci (45), max
		// length, type VAR_STRING (253), flags, decimals, filler.
		d = append(d, 0x0c, 45, 0, 0, 1, 0, 0, 253, 0, 0, 0, 0, 0)
		if err := put(d); err != nil {
			return err
		}
	}
	if !deprecateEOF {
		if err := put(AppendEOF(buf[:0], status, 0)); err != nil {
			return err
		}
	}
	for _, row := range rows {
		d := buf[:0]
		for _, v := range row {
			if v == NullCell {
				d = append(d, 0xfb)
				continue
			}
			d = AppendLenEncString(d, []byte(v))
		}
		if err := put(d); err != nil {
			return err
		}
	}
	if deprecateEOF {
		ok := AppendOK(buf[:0], 0, 0, status, 0)
		ok[0] = EOFPacket
		return put(ok)
	}
	return put(AppendEOF(buf[:0], status, 0))
}
