package sqlscan

import (
	"bytes"
	"testing"
)

// The functions below are how the frontend and this package answered
// these questions before Scan did, each with its own pass over the text
// (FirstKeyword, SetsInsertIDUnseen, KillTarget, and the frontend's usesTables,
// isNextTrxSet and substring searches; QualifySessionSets' walk stays as
// the fallback qualifySessionSets).
// checkFacts holds Scan's answers to them on every fuzz input.

func oldFirstKeyword(q []byte) Keyword {
	lx := NewLexer(q)
	t := lx.Next()
	for t.Kind == TokLParen {
		t = lx.Next()
	}
	if t.Kind != TokWord {
		return kwNone
	}
	return t.Keyword
}

func oldSetsInsertIDUnseen(q []byte, info Info) bool {
	if info.Flags&FlagMulti != 0 {
		return true
	}
	switch oldFirstKeyword(q) {
	case KwCall, KwLoad, KwExecute:
		return true
	}
	set := info.Class == ClassSet
	if info.Flags&FlagLastInsertID == 0 && !set {
		return false
	}
	lx := NewLexer(q)
	prev, prev2 := Token{}, Token{}
	for {
		t := lx.Next()
		if t.Kind == TokEOF {
			return false
		}
		if set {
			switch t.Kind {
			case TokWord:
				if t.Keyword == KwLastInsertID || equalFold(q[t.Start:t.End], "identity") {
					return true
				}
			case TokSysVar:
				if name, _ := sysVarName(q[t.Start:t.End]); equalFold(name, "identity") || equalFold(name, "last_insert_id") {
					return true
				}
			}
			continue
		}
		if prev2.Kind == TokWord && prev2.Keyword == KwLastInsertID && prev.Kind == TokLParen && t.Kind != TokRParen {
			return true
		}
		prev2, prev = prev, t
	}
}

// oldKillTarget is the KillTarget that lexed the text itself.
func oldKillTarget(q []byte) (id uint64, query bool, ok bool) {
	lx := NewLexer(q)
	t := lx.Next()
	if t.Keyword != KwKill {
		return 0, false, false
	}
	t = lx.Next()
	if t.Keyword == KwHard || t.Keyword == KwSoft {
		t = lx.Next()
	}
	switch t.Keyword {
	case KwConnection:
		t = lx.Next()
	case KwQuery:
		query = true
		t = lx.Next()
	}
	if t.Kind != TokNumber {
		return 0, false, false
	}
	for _, c := range q[t.Start:t.End] {
		if !isDigit(c) {
			return 0, false, false
		}
		d := uint64(c - '0')
		if id > (1<<64-1-d)/10 {
			return 0, false, false // overflow
		}
		id = id*10 + d
	}
	for t = lx.Next(); t.Kind == TokSemicolon; t = lx.Next() {
	}
	if t.Kind != TokEOF {
		return 0, false, false
	}
	return id, query, true
}

// oldUsesTables is the frontend's usesTables (prev.go).
func oldUsesTables(info Info, q []byte) bool {
	switch info.Class {
	case ClassWrite, ClassUnknown:
		return true
	case ClassRead:
	default:
		return false
	}
	lx := NewLexer(q)
	first := true
	for t := lx.Next(); t.Kind != TokEOF; t = lx.Next() {
		if first && t.Keyword == KwShow {
			return true
		}
		first = false
		if t.Kind == TokWord && t.Keyword.String() == "FROM" {
			n := lx.Next()
			if !(n.Kind == TokWord && n.Keyword.String() == "DUAL") {
				return true
			}
		}
	}
	return false
}

// oldIsNextTrxSet is the frontend's isNextTrxSet (commands.go).
func oldIsNextTrxSet(q []byte) bool {
	return bytes.HasPrefix(Normalize(nil, q), []byte("SET TRANSACTION "))
}

// tokensIsNull: IS and NULL as consecutive tokens, the meaning FactIsNull
// has (the frontend searched the raw text for "is null").
func tokensIsNull(q []byte) bool {
	lx := NewLexer(q)
	prev := Token{}
	for t := lx.Next(); t.Kind != TokEOF; t = lx.Next() {
		if prev.Kind == TokWord && prev.Keyword == kwIs && t.Kind == TokWord && t.Keyword == KwNull {
			return true
		}
		prev = t
	}
	return false
}

// containsFold reports whether q contains lower (lower-case ASCII) in any
// case, without copying q (bytes.ToLower would copy a 64 MiB statement).
func containsFold(q []byte, lower string) bool {
	for i := 0; i+len(lower) <= len(q); i++ {
		if equalFold(q[i:i+len(lower)], lower) {
			return true
		}
	}
	return false
}

func checkFacts(t *testing.T, q []byte, info Info) {
	t.Helper()
	if got, want := info.First, oldFirstKeyword(q); got != want {
		t.Fatalf("Scan(%q).First = %v, FirstKeyword = %v", q, got, want)
	}
	if got, want := info.SetsInsertIDUnseen(), oldSetsInsertIDUnseen(q, info); got != want {
		t.Fatalf("Scan(%q).SetsInsertIDUnseen() = %v, the lexing one %v", q, got, want)
	}
	withID := info
	withID.Flags |= FlagLastInsertID // as the frontend adds it for IS NULL
	if got, want := withID.SetsInsertIDUnseen(), oldSetsInsertIDUnseen(q, withID); got != want {
		t.Fatalf("Scan(%q) with FlagLastInsertID: SetsInsertIDUnseen() = %v, the lexing one %v", q, got, want)
	}
	if id, query, ok := info.KillTarget(); true {
		wid, wquery, wok := oldKillTarget(q)
		if id != wid || query != wquery || ok != wok {
			t.Fatalf("Scan(%q).KillTarget() = %d, %v, %v; KillTarget %d, %v, %v", q, id, query, ok, wid, wquery, wok)
		}
	}
	if got, want := info.OpensTable(), oldUsesTables(info, q); got != want {
		t.Fatalf("Scan(%q).OpensTable() = %v, usesTables %v", q, got, want)
	}
	if info.Class == ClassSet {
		if got, want := info.Facts&FactNextTrx != 0, oldIsNextTrxSet(q); got != want {
			t.Fatalf("Scan(%q): FactNextTrx %v, Normalize prefix %v", q, got, want)
		}
	}
	gotQ, gotOK := info.QualifySessionSets([]byte("x"), q)
	wantQ, wantOK := qualifySessionSets([]byte("x"), q)
	if gotOK != wantOK || !bytes.Equal(gotQ, wantQ) {
		t.Fatalf("Scan(%q).QualifySessionSets = %q, %v; the walk %q, %v", q, gotQ, gotOK, wantQ, wantOK)
	}
	if got, want := info.Facts&FactIsNull != 0, tokensIsNull(q); got != want {
		t.Fatalf("Scan(%q): FactIsNull %v, tokens %v", q, got, want)
	}
	// Narrower than the substring searches they replace: only names in
	// code count, not strings, comments or parts of longer names.
	if info.Facts&FactProcesslist != 0 && !containsFold(q, "processlist") {
		t.Fatalf("Scan(%q): FactProcesslist without the word", q)
	}
	if info.Facts&FactTrackName != 0 && !containsFold(q, "session_track_") {
		t.Fatalf("Scan(%q): FactTrackName without the prefix", q)
	}
}

func TestFacts(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want Facts
	}{
		{"SELECT 1", 0},
		{"SHOW WARNINGS", FactOpensTable},
		{"SELECT 1 FROM DUAL", 0},
		{"SELECT a FROM t", FactOpensTable},
		{"SELECT * FROM t WHERE id IS NULL", FactOpensTable | FactIsNull},
		{"SELECT * FROM t WHERE id IS /* c */\n NULL", FactOpensTable | FactIsNull},
		{"SELECT 'a is null'", 0},
		{"SET TRANSACTION READ ONLY", FactNextTrx},
		{"SET SESSION TRANSACTION READ ONLY", 0},
		{"SHOW PROCESSLIST", FactOpensTable | FactProcesslist},
		{"SELECT * FROM information_schema.`PROCESSLIST` WHERE id = CONNECTION_ID()", FactOpensTable | FactProcesslist},
		{"SET GLOBAL session_track_schema = OFF", FactTrackName},
		{"SELECT @@session_track_gtids", FactTrackName},
	} {
		if got := Scan([]byte(tc.q)).Facts & (FactNextTrx | FactOpensTable | FactIsNull | FactProcesslist | FactTrackName); got != tc.want {
			t.Errorf("Scan(%q).Facts = %b, want %b", tc.q, got, tc.want)
		}
	}
	for _, tc := range []struct {
		q    string
		want Keyword
	}{
		{"", 0}, {"  /* x */ ((select 1))", KwSelect}, {"1", 0}, {";SELECT 1", 0}, {"show warnings", KwShow},
	} {
		if got := Scan([]byte(tc.q)).First; got != tc.want {
			t.Errorf("Scan(%q).First = %v, want %v", tc.q, got, tc.want)
		}
	}
}
