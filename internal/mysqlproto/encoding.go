package mysqlproto

import "encoding/binary"

// ReadLenEncInt decodes a length-encoded integer at b[pos:].
func ReadLenEncInt(b []byte, pos int) (v uint64, next int, ok bool) {
	if pos >= len(b) {
		return 0, pos, false
	}
	switch c := b[pos]; {
	case c < 0xfb:
		return uint64(c), pos + 1, true
	case c == 0xfc:
		if pos+3 > len(b) {
			return 0, pos, false
		}
		return uint64(binary.LittleEndian.Uint16(b[pos+1:])), pos + 3, true
	case c == 0xfd:
		if pos+4 > len(b) {
			return 0, pos, false
		}
		return uint64(b[pos+1]) | uint64(b[pos+2])<<8 | uint64(b[pos+3])<<16, pos + 4, true
	case c == 0xfe:
		if pos+9 > len(b) {
			return 0, pos, false
		}
		return binary.LittleEndian.Uint64(b[pos+1:]), pos + 9, true
	default: // 0xfb is NULL, 0xff is invalid
		return 0, pos + 1, false
	}
}

// ReadLenEncString returns the length-encoded string at b[pos:].
func ReadLenEncString(b []byte, pos int) (s []byte, next int, ok bool) {
	n, p, ok := ReadLenEncInt(b, pos)
	if !ok || uint64(len(b)-p) < n {
		return nil, pos, false
	}
	return b[p : p+int(n)], p + int(n), true
}

// ReadNulString returns the NUL-terminated string at b[pos:].
func ReadNulString(b []byte, pos int) (s []byte, next int, ok bool) {
	for i := pos; i < len(b); i++ {
		if b[i] == 0 {
			return b[pos:i], i + 1, true
		}
	}
	return nil, pos, false
}

// AppendLenEncInt appends v as a length-encoded integer.
func AppendLenEncInt(b []byte, v uint64) []byte {
	switch {
	case v < 0xfb:
		return append(b, byte(v))
	case v <= 0xffff:
		return append(b, 0xfc, byte(v), byte(v>>8))
	case v <= 0xffffff:
		return append(b, 0xfd, byte(v), byte(v>>8), byte(v>>16))
	default:
		return binary.LittleEndian.AppendUint64(append(b, 0xfe), v)
	}
}

// AppendLenEncString appends s as a length-encoded string.
func AppendLenEncString(b, s []byte) []byte {
	return append(AppendLenEncInt(b, uint64(len(s))), s...)
}

// LenEncIntSize is the encoded size of v.
func LenEncIntSize(v uint64) int {
	switch {
	case v < 0xfb:
		return 1
	case v <= 0xffff:
		return 3
	case v <= 0xffffff:
		return 4
	default:
		return 9
	}
}
