package mysqlproto

import "encoding/binary"

// Server replies a proxy inspects while it streams them, and the frames
// they travel in. OK, ERR and EOF are in packets.go.

// frameHeader is the length of a frame's header: 3 bytes of payload
// length and the sequence id.
const frameHeader = 4

// FramePayload is the payload of a frame returned by ReadFrame.
func FramePayload(f []byte) []byte { return f[frameHeader:] }

// FrameSeq is the sequence id of a frame returned by ReadFrame.
func FrameSeq(f []byte) byte { return f[frameHeader-1] }

// IsEmptyFrame reports whether f carries an empty payload (the end of a
// LOAD DATA LOCAL file, among others).
func IsEmptyFrame(f []byte) bool { return len(f) == frameHeader }

// Header is the first byte of a payload, which says what it is: a
// client's command byte (ComQuery, …), or the kind of a server's reply
// (OKPacket, ErrPacket, EOFPacket, LocalInfilePacket, or the start of a
// column count); ok is false for an empty payload.
func Header(p []byte) (h byte, ok bool) {
	if len(p) == 0 {
		return 0, false
	}
	return p[0], true
}

// IsErrPacket reports whether p is an ERR packet.
func IsErrPacket(p []byte) bool { return len(p) > 0 && p[0] == ErrPacket }

// IsOKPacket reports whether p is an OK packet with the 0x00 header (not
// the 0xfe one that ends a result set under CLIENT_DEPRECATE_EOF).
func IsOKPacket(p []byte) bool { return len(p) > 0 && p[0] == OKPacket }

// IsEOFHeader reports whether p starts with the EOF header 0xfe: a classic
// EOF, or an OK that ends a result set under CLIENT_DEPRECATE_EOF.
func IsEOFHeader(p []byte) bool { return len(p) > 0 && p[0] == EOFPacket }

// IsRowsEnd reports whether p, read where a row may come, ends the rows:
// a classic EOF, or with deprecateEOF an OK with the 0xfe header. A row
// can start with 0xfe only as an 8-byte length, in a packet of at least
// MaxPayload bytes.
func IsRowsEnd(p []byte, deprecateEOF bool) bool {
	return IsEOFHeader(p) && len(p) < MaxPayload && (deprecateEOF || len(p) < 9)
}

// AppendEOFOK appends an OK with the 0xfe header, which ends a result set
// (or answers COM_SET_OPTION) for a client with CLIENT_DEPRECATE_EOF.
func AppendEOFOK(dst []byte, status, warnings uint16) []byte {
	at := len(dst)
	dst = AppendOK(dst, 0, 0, status, warnings)
	dst[at] = EOFPacket
	return dst
}

// ParseColumnCount decodes the packet that starts a result set.
func ParseColumnCount(p []byte) (uint64, bool) {
	n, _, ok := ReadLenEncInt(p, 0)
	return n, ok
}

// AppendColumnCount appends the packet that starts a result set of n
// columns.
func AppendColumnCount(dst []byte, n uint64) []byte { return AppendLenEncInt(dst, n) }

// StmtPrepareOK is the first packet of a successful COM_STMT_PREPARE's
// reply; the parameter and column definitions follow.
type StmtPrepareOK struct {
	StmtID   uint32
	Columns  uint16
	Params   uint16
	Warnings uint16
}

// stmtPrepareOKLen: header, id, columns, params, filler, warnings.
const stmtPrepareOKLen = 12

// ParseStmtPrepareOK decodes a COM_STMT_PREPARE OK packet.
func ParseStmtPrepareOK(p []byte) (StmtPrepareOK, bool) {
	if len(p) < stmtPrepareOKLen || p[0] != OKPacket {
		return StmtPrepareOK{}, false
	}
	return StmtPrepareOK{
		StmtID:   binary.LittleEndian.Uint32(p[1:]),
		Columns:  binary.LittleEndian.Uint16(p[5:]),
		Params:   binary.LittleEndian.Uint16(p[7:]),
		Warnings: binary.LittleEndian.Uint16(p[10:]),
	}, true
}

// AppendStmtPrepareOK appends a COM_STMT_PREPARE OK packet for ok.
func AppendStmtPrepareOK(dst []byte, ok StmtPrepareOK) []byte {
	dst = binary.LittleEndian.AppendUint32(append(dst, OKPacket), ok.StmtID)
	dst = binary.LittleEndian.AppendUint16(dst, ok.Columns)
	dst = binary.LittleEndian.AppendUint16(dst, ok.Params)
	return binary.LittleEndian.AppendUint16(append(dst, 0), ok.Warnings)
}

// LocalInfileRequest is the server's LOAD DATA LOCAL request: the file
// the client is to send.
type LocalInfileRequest struct {
	Filename []byte
}

// ParseLocalInfileRequest decodes a LOAD DATA LOCAL request packet.
func ParseLocalInfileRequest(p []byte) (LocalInfileRequest, bool) {
	if len(p) < 1 || p[0] != LocalInfilePacket {
		return LocalInfileRequest{}, false
	}
	return LocalInfileRequest{Filename: p[1:]}, true
}

// AppendLocalInfileRequest appends a LOAD DATA LOCAL request for r.
func AppendLocalInfileRequest(dst []byte, r LocalInfileRequest) []byte {
	return append(append(dst, LocalInfilePacket), r.Filename...)
}
