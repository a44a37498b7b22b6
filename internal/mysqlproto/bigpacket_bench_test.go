package mysqlproto

import "testing"

// framed splits payload into frames as a client sends it (16 MiB-1 each,
// then the rest, an empty frame when it is a multiple).
func framed(payload []byte) []byte {
	var out []byte
	seq := byte(0)
	for {
		n := min(len(payload), MaxPayload)
		out = append(out, byte(n), byte(n>>8), byte(n>>16), seq)
		out = append(out, payload[:n]...)
		payload = payload[n:]
		seq++
		if n < MaxPayload {
			return out
		}
	}
}

// bigQuery is a COM_QUERY of n bytes: SELECT LENGTH('xxx…').
func bigQuery(n int) []byte {
	p := make([]byte, n)
	copy(p, "\x03SELECT LENGTH('")
	for i := 16; i < n-2; i++ {
		p[i] = 'x'
	}
	copy(p[n-2:], "')")
	return p
}

// BenchmarkLargeStatement reads one 64 MiB COM_QUERY (four full frames
// and a short one) from a client connection and writes it to a server
// connection, as the proxy does: the bytes allocated per statement should
// be about the statement once.
func BenchmarkLargeStatement(b *testing.B) {
	b.Run("budget", func(b *testing.B) { benchLargeStatement(b, NewBudget(256<<20)) })
	b.Run("nobudget", func(b *testing.B) { benchLargeStatement(b, nil) })
}

func benchLargeStatement(b *testing.B, budget *Budget) {
	stream := framed(bigQuery(DefaultMaxAllowedBytes - 64))
	src := NewConn(&loopConn{data: stream})
	src.MaxPacket = DefaultMaxAllowedBytes
	src.SetBudget(budget)
	dst := NewConn(&loopConn{data: []byte{0}})
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		src.Seq = 0
		p, err := src.ReadPacket()
		if err != nil {
			b.Fatal(err)
		}
		dst.Seq = 0
		if err := dst.WritePacket(p); err != nil {
			b.Fatal(err)
		}
		if err := dst.Flush(); err != nil {
			b.Fatal(err)
		}
		src.ReleaseBig()
	}
}
