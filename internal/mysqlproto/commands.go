package mysqlproto

import "encoding/binary"

// Client commands, one Parse/Append pair each. A Parse function takes the
// whole command packet (command byte included), checks the command byte
// and returns the command by value; its byte slices alias the packet (no
// copy, no allocation), so they are valid as long as the packet is. Where
// a server answers a malformed command with an error, Parse returns that
// error (the code and message MariaDB's clients see from Vigil); commands
// without a reply still report it, and the caller ignores it. COM_CHANGE_USER
// is ParseChangeUser / AppendChangeUser (handshake.go).

// textCommand returns what follows the command byte of a command that
// carries only text (COM_QUERY, COM_INIT_DB, COM_STMT_PREPARE).
func textCommand(pkt []byte, cmd byte, name string) ([]byte, *SQLError) {
	if len(pkt) < 1 || pkt[0] != cmd {
		return nil, malformed(name)
	}
	return pkt[1:], nil
}

// malformed is the answer to a command packet too short for its fields.
// Kept out of line: the decoders that call it stay small enough to inline.
//
//go:noinline
func malformed(what string) *SQLError {
	return NewError(ERMalformedPacket, "HY000", "Malformed %s", what)
}

// Query is COM_QUERY: the statement text. Vigil does not negotiate
// CLIENT_QUERY_ATTRIBUTES, so the text is everything after the command byte.
type Query struct {
	Text []byte
}

// ParseQuery decodes a COM_QUERY packet.
func ParseQuery(pkt []byte) (Query, *SQLError) {
	text, bad := textCommand(pkt, ComQuery, "COM_QUERY")
	return Query{Text: text}, bad
}

// AppendQuery appends a COM_QUERY packet for q.
func AppendQuery(dst []byte, q Query) []byte {
	return append(append(dst, ComQuery), q.Text...)
}

// InitDB is COM_INIT_DB: the schema to use.
type InitDB struct {
	Schema []byte
}

// ParseInitDB decodes a COM_INIT_DB packet.
func ParseInitDB(pkt []byte) (InitDB, *SQLError) {
	schema, bad := textCommand(pkt, ComInitDB, "COM_INIT_DB")
	return InitDB{Schema: schema}, bad
}

// AppendInitDB appends a COM_INIT_DB packet for d.
func AppendInitDB(dst []byte, d InitDB) []byte {
	return append(append(dst, ComInitDB), d.Schema...)
}

// FieldList is COM_FIELD_LIST: a table (NUL-terminated) and a column
// wildcard (the rest of the packet, possibly empty).
type FieldList struct {
	Table    []byte
	Wildcard []byte
}

// ParseFieldList decodes a COM_FIELD_LIST packet.
func ParseFieldList(pkt []byte) (FieldList, *SQLError) {
	if len(pkt) < 1 || pkt[0] != ComFieldList {
		return FieldList{}, malformed("COM_FIELD_LIST")
	}
	table, pos, ok := ReadNulString(pkt, 1)
	if !ok {
		return FieldList{}, malformed("COM_FIELD_LIST")
	}
	return FieldList{Table: table, Wildcard: pkt[pos:]}, nil
}

// AppendFieldList appends a COM_FIELD_LIST packet for l.
func AppendFieldList(dst []byte, l FieldList) []byte {
	dst = append(append(dst, ComFieldList), l.Table...)
	return append(append(dst, 0), l.Wildcard...)
}

// ProcessKill is COM_PROCESS_KILL: the connection to kill.
type ProcessKill struct {
	ConnectionID uint32
}

// ParseProcessKill decodes a COM_PROCESS_KILL packet.
func ParseProcessKill(pkt []byte) (ProcessKill, *SQLError) {
	if len(pkt) < 5 || pkt[0] != ComProcessKill {
		return ProcessKill{}, malformed("COM_PROCESS_KILL")
	}
	return ProcessKill{ConnectionID: binary.LittleEndian.Uint32(pkt[1:])}, nil
}

// AppendProcessKill appends a COM_PROCESS_KILL packet for k.
func AppendProcessKill(dst []byte, k ProcessKill) []byte {
	return binary.LittleEndian.AppendUint32(append(dst, ComProcessKill), k.ConnectionID)
}

// SetOption is COM_SET_OPTION: SetOptionMultiStatementsOn or Off.
type SetOption struct {
	Option uint16
}

// ParseSetOption decodes a COM_SET_OPTION packet.
func ParseSetOption(pkt []byte) (SetOption, *SQLError) {
	if len(pkt) < 3 || pkt[0] != ComSetOption {
		return SetOption{}, malformed("COM_SET_OPTION")
	}
	return SetOption{Option: binary.LittleEndian.Uint16(pkt[1:])}, nil
}

// AppendSetOption appends a COM_SET_OPTION packet for o.
func AppendSetOption(dst []byte, o SetOption) []byte {
	return binary.LittleEndian.AppendUint16(append(dst, ComSetOption), o.Option)
}

// ParseBare decodes a command without arguments (COM_PING, COM_QUIT,
// COM_STATISTICS, COM_RESET_CONNECTION, COM_DEBUG): it reports whether pkt
// is cmd. Bytes after the command byte are ignored, as servers do.
func ParseBare(pkt []byte, cmd byte) bool {
	return len(pkt) >= 1 && pkt[0] == cmd
}

// AppendBare appends a command without arguments.
func AppendBare(dst []byte, cmd byte) []byte { return append(dst, cmd) }

// StmtPrepare is COM_STMT_PREPARE: the statement text.
type StmtPrepare struct {
	Query []byte
}

// ParseStmtPrepare decodes a COM_STMT_PREPARE packet.
func ParseStmtPrepare(pkt []byte) (StmtPrepare, *SQLError) {
	query, bad := textCommand(pkt, ComStmtPrepare, "COM_STMT_PREPARE")
	return StmtPrepare{Query: query}, bad
}

// AppendStmtPrepare appends a COM_STMT_PREPARE packet for p.
func AppendStmtPrepare(dst []byte, p StmtPrepare) []byte {
	return append(append(dst, ComStmtPrepare), p.Query...)
}

// stmtHeader reads the statement id that follows the command byte of
// the COM_STMT_* commands, in a packet of at least min bytes.
func stmtHeader(pkt []byte, cmd byte, min int, name string) (uint32, *SQLError) {
	if len(pkt) < min || pkt[0] != cmd {
		return 0, malformed(name)
	}
	return binary.LittleEndian.Uint32(pkt[1:]), nil
}

// StmtIDOf is the statement id of a COM_STMT_* packet (execute, send
// long data, close, reset, fetch); ok is false for a packet too short to
// hold one.
func StmtIDOf(pkt []byte) (id uint32, ok bool) {
	if len(pkt) < 5 {
		return 0, false
	}
	return binary.LittleEndian.Uint32(pkt[1:5]), true
}

// PutStmtID replaces, in place, the statement id of a COM_STMT_* packet
// (execute, send long data, close, reset, fetch) or of a COM_STMT_PREPARE
// OK payload: in all of them it follows the first byte. A proxy maps the
// client's ids to the server's this way without copying the packet. pkt
// must have been decoded (it is at least 5 bytes long).
func PutStmtID(pkt []byte, id uint32) {
	binary.LittleEndian.PutUint32(pkt[1:5], id)
}

// StmtExecute is COM_STMT_EXECUTE. Its parameter block can only be read
// with the statement's parameter count, which the statement's owner
// knows: ExecuteParams.Parse decodes it.
type StmtExecute struct {
	StmtID         uint32
	Flags          byte // CursorTypeReadOnly, …
	IterationCount uint32
	Params         []byte // the parameter block, as sent
}

// stmtExecuteFixed is the length of COM_STMT_EXECUTE's fixed part:
// command, statement id, flags, iteration count.
const stmtExecuteFixed = 10

// ParseStmtExecute decodes a COM_STMT_EXECUTE packet.
func ParseStmtExecute(pkt []byte) (StmtExecute, *SQLError) {
	if len(pkt) < stmtExecuteFixed || pkt[0] != ComStmtExecute {
		return StmtExecute{}, malformed("COM_STMT_EXECUTE")
	}
	return StmtExecute{StmtID: binary.LittleEndian.Uint32(pkt[1:]), Flags: pkt[5],
		IterationCount: binary.LittleEndian.Uint32(pkt[6:]), Params: pkt[stmtExecuteFixed:]}, nil
}

// AppendStmtExecute appends a COM_STMT_EXECUTE packet for e (its
// parameter block as it is: AppendExecuteParams writes one).
func AppendStmtExecute(dst []byte, e StmtExecute) []byte {
	dst = binary.LittleEndian.AppendUint32(append(dst, ComStmtExecute), e.StmtID)
	dst = binary.LittleEndian.AppendUint32(append(dst, e.Flags), e.IterationCount)
	return append(dst, e.Params...)
}

// ExecuteParams is the parameter block of a COM_STMT_EXECUTE for a
// statement with parameters: the null bitmap, the types when the client
// (re)bound them (the new-params-bound flag is 1), and the values.
type ExecuteParams struct {
	NullBitmap []byte
	Types      []byte // 2 bytes a parameter; empty when not (re)bound
	Values     []byte // the binary values, up to the end of the packet
}

// NewParamsBound reports whether the block carries the types.
func (p ExecuteParams) NewParamsBound() bool { return len(p.Types) > 0 }

// Parse decodes into p the parameter block of an execute whose statement
// has n parameters (n > 0; without parameters there is no block to read).
// It fills the caller's value rather than returning one: three slices do
// not fit the registers a result is returned in, and the copy through
// memory was measurable on every execute (BenchmarkParseCommands).
func (p *ExecuteParams) Parse(block []byte, n uint16) *SQLError {
	bitmap := (int(n) + 7) / 8
	if bitmap >= len(block) {
		return malformed("COM_STMT_EXECUTE parameters")
	}
	p.NullBitmap, p.Types, p.Values = block[:bitmap], nil, block[bitmap+1:]
	if block[bitmap] == 1 {
		if 2*int(n) > len(p.Values) {
			return malformed("COM_STMT_EXECUTE parameter types")
		}
		p.Types, p.Values = p.Values[:2*int(n)], p.Values[2*int(n):]
	}
	return nil
}

// AppendExecuteParams appends the parameter block p (after an execute's
// fixed part): the new-params-bound flag is 1 when p has types.
func AppendExecuteParams(dst []byte, p ExecuteParams) []byte {
	dst = append(dst, p.NullBitmap...)
	if len(p.Types) == 0 {
		return append(append(dst, 0), p.Values...)
	}
	dst = append(append(dst, 1), p.Types...)
	return append(dst, p.Values...)
}

// StmtSendLongData is COM_STMT_SEND_LONG_DATA: a piece of one parameter's
// value. It has no reply, even when malformed.
type StmtSendLongData struct {
	StmtID  uint32
	ParamID uint16
	Data    []byte
}

// ParseStmtSendLongData decodes a COM_STMT_SEND_LONG_DATA packet.
func ParseStmtSendLongData(pkt []byte) (StmtSendLongData, *SQLError) {
	id, bad := stmtHeader(pkt, ComStmtSendLongData, 7, "COM_STMT_SEND_LONG_DATA")
	if bad != nil {
		return StmtSendLongData{}, bad
	}
	return StmtSendLongData{StmtID: id, ParamID: binary.LittleEndian.Uint16(pkt[5:]), Data: pkt[7:]}, nil
}

// AppendStmtSendLongData appends a COM_STMT_SEND_LONG_DATA packet for d.
func AppendStmtSendLongData(dst []byte, d StmtSendLongData) []byte {
	dst = binary.LittleEndian.AppendUint32(append(dst, ComStmtSendLongData), d.StmtID)
	return append(binary.LittleEndian.AppendUint16(dst, d.ParamID), d.Data...)
}

// StmtClose is COM_STMT_CLOSE. It has no reply, even when malformed.
type StmtClose struct {
	StmtID uint32
}

// ParseStmtClose decodes a COM_STMT_CLOSE packet.
func ParseStmtClose(pkt []byte) (StmtClose, *SQLError) {
	id, bad := stmtHeader(pkt, ComStmtClose, 5, "COM_STMT_CLOSE")
	return StmtClose{StmtID: id}, bad
}

// AppendStmtClose appends a COM_STMT_CLOSE packet for c.
func AppendStmtClose(dst []byte, c StmtClose) []byte {
	return binary.LittleEndian.AppendUint32(append(dst, ComStmtClose), c.StmtID)
}

// StmtReset is COM_STMT_RESET.
type StmtReset struct {
	StmtID uint32
}

// ParseStmtReset decodes a COM_STMT_RESET packet.
func ParseStmtReset(pkt []byte) (StmtReset, *SQLError) {
	id, bad := stmtHeader(pkt, ComStmtReset, 5, "COM_STMT_RESET")
	return StmtReset{StmtID: id}, bad
}

// AppendStmtReset appends a COM_STMT_RESET packet for r.
func AppendStmtReset(dst []byte, r StmtReset) []byte {
	return binary.LittleEndian.AppendUint32(append(dst, ComStmtReset), r.StmtID)
}

// StmtFetch is COM_STMT_FETCH: rows to read from a statement's cursor.
type StmtFetch struct {
	StmtID uint32
	Rows   uint32
}

// ParseStmtFetch decodes a COM_STMT_FETCH packet.
func ParseStmtFetch(pkt []byte) (StmtFetch, *SQLError) {
	id, bad := stmtHeader(pkt, ComStmtFetch, 9, "COM_STMT_FETCH")
	if bad != nil {
		return StmtFetch{}, bad
	}
	return StmtFetch{StmtID: id, Rows: binary.LittleEndian.Uint32(pkt[5:])}, nil
}

// AppendStmtFetch appends a COM_STMT_FETCH packet for f.
func AppendStmtFetch(dst []byte, f StmtFetch) []byte {
	dst = binary.LittleEndian.AppendUint32(append(dst, ComStmtFetch), f.StmtID)
	return binary.LittleEndian.AppendUint32(dst, f.Rows)
}
