package sqlscan

import (
	"strconv"
	"strings"
	"testing"
)

var (
	benchPointSelect = []byte("SELECT c FROM sbtest1 WHERE id=50123")
	benchInsert      = func() []byte {
		var b strings.Builder
		b.WriteString("INSERT INTO sbtest1 (id, k, c, pad) VALUES ")
		for i := 0; i < 100; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + strconv.Itoa(i) + ", 4993, '83868641912-28773972837-60736120486-75162659906-27563526494', '67847967377-48000963322-62604785301-91415491898-96926520291')")
		}
		return []byte(b.String())
	}()
	benchComment = []byte("/* app=shop,controller=cart,action=show,request_id=7f3a9c0e */ SELECT /*+ MAX_EXECUTION_TIME(1000) */ c, pad FROM sbtest1 WHERE id IN (1, 2, 3, 4, 5) -- trailing\n")
	benchUpdate  = []byte("UPDATE sbtest1 SET k=k+1 WHERE id=5")
	benchSet     = []byte("SET @@sql_mode = 'STRICT_TRANS_TABLES', @@session.time_zone = '+00:00', @@max_execution_time = 1000")
	benchRefs    = []byte("SELECT o.id, c.name FROM shop.orders o JOIN crm.customers c ON o.customer_id = c.id WHERE o.id = 42")
)

func benchScan(b *testing.B, q []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		Scan(q)
	}
}

func BenchmarkScanPointSelect(b *testing.B) { benchScan(b, benchPointSelect) }
func BenchmarkScanInsert(b *testing.B)      { benchScan(b, benchInsert) }
func BenchmarkScanComment(b *testing.B)     { benchScan(b, benchComment) }
func BenchmarkScanUpdate(b *testing.B)      { benchScan(b, benchUpdate) }
func BenchmarkScanSet(b *testing.B)         { benchScan(b, benchSet) }

func benchScanRefs(b *testing.B, q []byte) {
	var r Refs
	b.ReportAllocs()
	b.SetBytes(int64(len(q)))
	for b.Loop() {
		ScanRefs(q, &r)
	}
}

// BenchmarkScanRefs: Scan that also collects schema names, on a join
// across two schemas; BenchmarkScanRefsPlain is Scan of the same text,
// BenchmarkScanRefsPointSelect ScanRefs where there is nothing to collect.
func BenchmarkScanRefs(b *testing.B)            { benchScanRefs(b, benchRefs) }
func BenchmarkScanRefsPlain(b *testing.B)       { benchScan(b, benchRefs) }
func BenchmarkScanRefsPointSelect(b *testing.B) { benchScanRefs(b, benchPointSelect) }

// BenchmarkQualifySessionSets: the SET rewrite from Scan's record, no
// second pass over the text.
func BenchmarkQualifySessionSets(b *testing.B) {
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchSet)))
	for b.Loop() {
		info := Scan(benchSet)
		dst, _ = info.QualifySessionSets(dst[:0], benchSet)
	}
}

func BenchmarkLexPointSelect(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchPointSelect)))
	for b.Loop() {
		lx := NewLexer(benchPointSelect)
		for lx.Next().Kind != TokEOF {
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchComment)))
	for b.Loop() {
		dst = Normalize(dst[:0], benchComment)
	}
}

func TestScanDoesNotAllocate(t *testing.T) {
	for _, q := range [][]byte{benchPointSelect, benchInsert, benchComment, benchUpdate,
		[]byte("SET autocommit=0, @x = (SELECT 1)"),
		[]byte("WITH c AS (SELECT 1) SELECT * FROM c FOR UPDATE; BEGIN NOT ATOMIC SELECT 1; END"),
		[]byte("INSERT INTO t VALUES (1, NOW()), (2, NOW()), (3, 4)"),
		benchSet, []byte("SELECT * FROM information_schema.PROCESSLIST WHERE id IS NULL AND @@session_track_schema"),
	} {
		if n := testing.AllocsPerRun(100, func() { Scan(q) }); n != 0 {
			t.Errorf("Scan(%q) allocates %v times", q, n)
		}
	}
	dst := make([]byte, 0, 1<<16)
	if n := testing.AllocsPerRun(100, func() { dst = Normalize(dst[:0], benchInsert) }); n != 0 {
		t.Errorf("Normalize with a large enough dst allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		info := Scan(benchSet)
		dst, _ = info.QualifySessionSets(dst[:0], benchSet)
	}); n != 0 {
		t.Errorf("Scan and QualifySessionSets with a large enough dst allocate %v times", n)
	}
}
