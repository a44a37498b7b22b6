package sqlscan

import "testing"

// FuzzScan checks that Scan, Normalize and the lexer never
// panic, that Scan's digest is the digest of Normalize's text, that
// Normalize is idempotent (so the digest of normalised text is the digest
// of the statement), that ScanRefs returns what Scan does, and that the
// lexer always makes progress.
func FuzzScan(f *testing.F) {
	for _, tt := range classifyTests {
		f.Add(tt.q)
	}
	for _, tt := range normalizeTests {
		f.Add(tt.q)
	}
	for _, tt := range refsTests {
		f.Add(tt.q)
	}
	for _, q := range []string{
		"SELECT /*!50001 1 */ /*M!100101 2 */ /*+ hint */ 3",
		"SELECT 'a\\'b' \"c\"\"d\" `e``f` _utf8mb4'g' N'h' X'0A' B'01' 0x1F 0b1 1.5e-3 .5",
		"SELECT @a := 1, @'b', @@global.c, ?",
		"INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, NOW()), (3, NOW()), ROW(1), (...)",
		"SELECT * FROM t WHERE a IN ((1, 2), (3, 4)) AND b IN (...) AND c IN (-1, +2)",
		"CREATE PROCEDURE p() BEGIN CASE WHEN a THEN BEGIN SELECT 1; END; END CASE; END; SELECT 1",
		"SET STATEMENT a=1 FOR EXPLAIN ANALYZE WITH c AS (SELECT 1) UPDATE t SET a = 1",
		"/*", "/*!", "'", "`", "\"", "@", "@@", "-- ", "#", "x'", "_utf8 '", "0x", ".", "...",
		"SELECT -", "VALUES (", "IN (", "((((((", "))))", ";;;;",
		"SELECT ROW_COUNT() + 1, (SELECT FOUND_ROWS()) x, LAST_INSERT_ID() AS y, @@identity, CONNECTION_ID(", "SET a = (1, b = 2",
		"SET SESSION TRANSACTION = 1, @@a = 2", "SET @@a=1,@@b=2,@@c=3,@@d=4,@@e=5,@@f=6,@@g=7,@@h=8,@@i=9,@@session.j=10",
		";SET TRANSACTION x", "SET TRANSACTION", "SET transaction ;", "SET `transaction` x", "(SET TRANSACTION x)", "SET /*!TRANSACTION*/ READ ONLY",
		"SET NEW.a = 1, @@b = 2", "SET STATEMENT @@a=1 FOR SET @@b=1", "SET @@a = 1; SET @@b = 2", "SET @@global.a = 1, SESSION @@b = 1, @@c := 2",
		"SELECT LAST_INSERT_ID(-5)", "SET @a = identity", "SELECT 1 FROM", "SELECT 1 FROM DUAL FROM t", "SELECT 1 FROM -1",
		"SELECT * FROM t WHERE a IS\nNULL", "SELECT 'this is null' FROM `processlist`", "SHOW full processlist", "KILL 5 6", "KILL HARD HARD 5", "KILL QUERY CONNECTION 5", ";KILL 5", "KILL 5;;", "(KILL 5)", "SET CHARACTER , @@a = 1", "SET CHARACTER SET utf8, @@a = 1",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		b := []byte(q)
		info := Scan(b)
		// The rewrites of client text never fail, and keep every byte
		// outside what they replace.
		all := FlagRowCount | FlagFoundRows | FlagLastInsertID | FlagConnectionID | FlagSessionTrack
		if out, ok := RewriteSessionFuncs(nil, b, SessionValues{RowCount: -1, Track: map[string]string{"session_track_schema": "ON"}}, all); !ok && len(out) != 0 {
			t.Fatalf("RewriteSessionFuncs(%q) changed nothing but wrote %q", q, out)
		}
		_ = SetAssignments(b)
		if out, ok := info.QualifySessionSets(nil, b); ok && len(out) <= len(b) {
			t.Fatalf("QualifySessionSets(%q) = %q: shorter than the input", q, out)
		}
		checkFacts(t, b, info)
		checkRefs(t, b, info)
		norm := Normalize(nil, b)
		if d := DigestText(norm); d != info.Digest {
			t.Fatalf("Scan(%q).Digest = %x, DigestText(%q) = %x", q, info.Digest, norm, d)
		}
		if again := Normalize(nil, norm); string(again) != string(norm) {
			t.Fatalf("Normalize(%q) = %q, but Normalize of that = %q", q, norm, again)
		}
		if info.Class > ClassSession {
			t.Fatalf("Scan(%q).Class = %d", q, info.Class)
		}
		lx := NewLexer(b)
		lx.KeepComments = true
		prev := -1
		for i := 0; ; i++ {
			tok := lx.Next()
			if tok.Start < 0 || tok.End > len(b) || tok.Start > tok.End || tok.Start < prev {
				t.Fatalf("bad token %+v in %q", tok, q)
			}
			if tok.Kind == TokEOF {
				break
			}
			if tok.End == tok.Start || i > len(b) {
				t.Fatalf("lexer does not advance at %d in %q", tok.Start, q)
			}
			prev = tok.End
		}
	})
}

// checkRefs: ScanRefs returns Scan's Info, and names that are not empty.
func checkRefs(t *testing.T, q []byte, info Info) {
	var r Refs
	if got := ScanRefs(q, &r); got != info {
		t.Fatalf("ScanRefs(%q) = %+v, Scan = %+v", q, got, info)
	}
	if r.Len() > maxRefs {
		t.Fatalf("ScanRefs(%q): %d names", q, r.Len())
	}
	for i := 0; i < r.Len(); i++ {
		if len(r.Name(i)) == 0 {
			t.Fatalf("ScanRefs(%q): name %d is empty", q, i)
		}
	}
	if use, ok := r.Use(); ok && len(use) == 0 {
		t.Fatalf("ScanRefs(%q): Use() is empty", q)
	}
}
