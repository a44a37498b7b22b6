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
// status without ServerSessionStateChanged and no session state. The info
// text stays length-encoded, as MariaDB and MySQL send it to such clients
// too (only an empty one is left out); mysqlnd (PHP) reads it that way.
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
	if len(ok.Info) == 0 {
		return dst
	}
	return AppendLenEncString(dst, ok.Info)
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
		case SessionTrackStateChange:
			ch.Name = data // "1"
		case SessionTrackSchema, SessionTrackTransactionCharacteristics, SessionTrackTransactionState:
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
	return WriteTextResultFor(c, cols, rows, status, deprecateEOF, false)
}

// WriteTextResultFor is WriteTextResult for a client that may have
// MariaDB's extended metadata (extMeta: an empty extended type info in
// each column definition, as MariaDB sends for a plain string column).
func WriteTextResultFor(c *Conn, cols []string, rows [][]string, status uint16, deprecateEOF, extMeta bool) error {
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
		if extMeta {
			d = append(d, 0)
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
		return put(AppendEOFOK(buf[:0], status, 0))
	}
	return put(AppendEOF(buf[:0], status, 0))
}

// TrackFilter says which session-state changes a client asked for with its
// own session_track_* variables. A proxy's server connections track more
// (every variable, state changes); the client must see only its own.
type TrackFilter struct {
	AllVars     bool     // session_track_system_variables='*'
	Vars        []string // lower-case names, when not AllVars
	Schema      bool     // session_track_schema
	StateChange bool     // session_track_state_change
	GTIDs       bool     // session_track_gtids (MySQL)
}

// DefaultTrackVars is MariaDB's and MySQL's default
// session_track_system_variables.
var DefaultTrackVars = []string{"autocommit", "character_set_client", "character_set_connection", "character_set_results", "time_zone"}

func (f *TrackFilter) keep(typ byte, name []byte) bool {
	switch typ {
	case SessionTrackSystemVariables:
		if f.AllVars {
			return true
		}
		for _, v := range f.Vars {
			if len(v) == len(name) && equalLower(name, v) {
				return true
			}
		}
		return false
	case SessionTrackSchema:
		return f.Schema
	case SessionTrackStateChange:
		return f.StateChange
	case SessionTrackGTIDs:
		return f.GTIDs
	}
	return true // transaction state and characteristics: only there when the client asked
}

func equalLower(b []byte, lower string) bool {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// FilterSessionState rewrites an OK payload p (parsed as ok from a
// session-tracking connection) for a client that negotiated
// CLIENT_SESSION_TRACK, keeping only the session-state entries f allows.
// It appends the result to dst; changed is false (and dst unchanged) when
// every entry is kept. Without entries left, the status loses
// SERVER_SESSION_STATE_CHANGED and an empty info text is left out, as a
// server sends it.
func FilterSessionState(dst, p []byte, ok OK, f *TrackFilter) (out []byte, changed bool) {
	block := ok.SessionState
	// A first pass: is anything dropped?
	drop := false
	for pos := 0; pos < len(block); {
		typ := block[pos]
		data, next, good := ReadLenEncString(block, pos+1)
		if !good {
			return dst, false
		}
		var name []byte
		if typ == SessionTrackSystemVariables {
			name, _, _ = ReadLenEncString(data, 0)
		}
		if !f.keep(typ, name) {
			drop = true
			break
		}
		pos = next
	}
	if !drop {
		return dst, false
	}
	pos := 1
	_, pos, _ = ReadLenEncInt(p, pos)
	_, pos, _ = ReadLenEncInt(p, pos)
	dst = append(dst, p[:pos]...)
	statusAt := len(dst)
	dst = binary.LittleEndian.AppendUint16(dst, ok.Status)
	dst = binary.LittleEndian.AppendUint16(dst, ok.Warnings)
	infoAt := len(dst)
	dst = AppendLenEncString(dst, ok.Info)
	// The kept entries, length-prefixed: written after a 3-byte length
	// placeholder, then moved if the length takes another size.
	blockAt := len(dst)
	for pos := 0; pos < len(block); {
		typ := block[pos]
		data, next, _ := ReadLenEncString(block, pos+1)
		var name []byte
		if typ == SessionTrackSystemVariables {
			name, _, _ = ReadLenEncString(data, 0)
		}
		if f.keep(typ, name) {
			dst = append(dst, block[pos:next]...)
		}
		pos = next
	}
	kept := len(dst) - blockAt
	if kept == 0 {
		st := ok.Status &^ ServerSessionStateChanged
		binary.LittleEndian.PutUint16(dst[statusAt:], st)
		if len(ok.Info) == 0 {
			dst = dst[:infoAt]
		}
		return dst, true
	}
	// Insert the block's length before the kept entries.
	var lb [9]byte
	l := AppendLenEncInt(lb[:0], uint64(kept))
	dst = append(dst, l...)
	copy(dst[blockAt+len(l):], dst[blockAt:blockAt+kept])
	copy(dst[blockAt:], l)
	return dst, true
}
