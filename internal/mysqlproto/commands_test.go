package mysqlproto

import (
	"bytes"
	"reflect"
	"testing"
)

// commandSeeds are well-formed packets of every command, for the fuzzers
// and the exact round-trip test.
var commandSeeds = [][]byte{
	[]byte("\x03SELECT 1"),
	[]byte("\x02shop"),
	[]byte("\x04t1\x00col%"),
	{ComProcessKill, 7, 0, 0, 0},
	{ComSetOption, 1, 0},
	{ComPing}, {ComQuit}, {ComStatistics}, {ComResetConnection},
	[]byte("\x16SELECT ?"),
	{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0},
	{ComStmtExecute, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0x02, 1, 8, 0, 3, 0, 42, 0, 0, 0, 0, 0, 0, 0},
	{ComStmtExecute, 2, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0, 5, 0, 0, 0},
	{ComStmtSendLongData, 1, 0, 0, 0, 0, 0, 'a', 'b'},
	{ComStmtClose, 1, 0, 0, 0},
	{ComStmtReset, 9, 0, 0, 0},
	{ComStmtFetch, 1, 0, 0, 0, 100, 0, 0, 0},
}

// roundTrip decodes pkt with parse; when that succeeds, the encoding of
// the result must decode to the same value. It reports whether pkt decoded.
func roundTrip[T any](t *testing.T, name string, pkt []byte, parse func([]byte) (T, *SQLError), encode func([]byte, T) []byte) bool {
	t.Helper()
	v, bad := parse(pkt)
	if bad != nil {
		return false
	}
	again, bad := parse(encode(nil, v))
	if bad != nil || !reflect.DeepEqual(v, again) {
		t.Fatalf("%s round trip of %x: %+v != %+v (%v)", name, pkt, v, again, bad)
	}
	return true
}

// roundTripCommand decodes pkt as every command with a Parse/Append pair
// and checks each that decodes (roundTrip). It reports whether any did.
func roundTripCommand(t *testing.T, pkt []byte) bool {
	t.Helper()
	decoded := false
	for _, ok := range []bool{
		roundTrip(t, "COM_QUERY", pkt, ParseQuery, AppendQuery),
		roundTrip(t, "COM_INIT_DB", pkt, ParseInitDB, AppendInitDB),
		roundTrip(t, "COM_FIELD_LIST", pkt, ParseFieldList, AppendFieldList),
		roundTrip(t, "COM_PROCESS_KILL", pkt, ParseProcessKill, AppendProcessKill),
		roundTrip(t, "COM_SET_OPTION", pkt, ParseSetOption, AppendSetOption),
		roundTrip(t, "COM_STMT_PREPARE", pkt, ParseStmtPrepare, AppendStmtPrepare),
		roundTrip(t, "COM_STMT_SEND_LONG_DATA", pkt, ParseStmtSendLongData, AppendStmtSendLongData),
		roundTrip(t, "COM_STMT_CLOSE", pkt, ParseStmtClose, AppendStmtClose),
		roundTrip(t, "COM_STMT_RESET", pkt, ParseStmtReset, AppendStmtReset),
		roundTrip(t, "COM_STMT_FETCH", pkt, ParseStmtFetch, AppendStmtFetch),
	} {
		decoded = decoded || ok
	}
	for _, cmd := range []byte{ComPing, ComQuit, ComStatistics, ComResetConnection} {
		if ParseBare(pkt, cmd) {
			if !ParseBare(AppendBare(nil, cmd), cmd) {
				t.Fatalf("bare command 0x%02x round trip", cmd)
			}
			decoded = true
		}
	}
	if roundTrip(t, "COM_STMT_EXECUTE", pkt, ParseStmtExecute, AppendStmtExecute) {
		decoded = true
		e, _ := ParseStmtExecute(pkt)
		for _, n := range []uint16{1, 2, 9} {
			parse := func(b []byte) (p ExecuteParams, bad *SQLError) {
				bad = p.Parse(b, n)
				return
			}
			roundTrip(t, "COM_STMT_EXECUTE parameters", e.Params, parse, AppendExecuteParams)
		}
	}
	return decoded
}

func TestCommandsRoundTrip(t *testing.T) {
	for _, pkt := range commandSeeds {
		if !roundTripCommand(t, pkt) {
			t.Errorf("%x does not decode", pkt)
		}
	}
	// Canonical packets encode back to the same bytes.
	q, _ := ParseQuery(commandSeeds[0])
	l, _ := ParseFieldList(commandSeeds[2])
	e, _ := ParseStmtExecute(commandSeeds[11])
	var ps ExecuteParams
	if bad := ps.Parse(e.Params, 2); bad != nil {
		t.Fatal(bad)
	}
	sent := e
	sent.Params = AppendExecuteParams(nil, ps)
	for i, got := range [][]byte{AppendQuery(nil, q), AppendFieldList(nil, l), AppendStmtExecute(nil, sent)} {
		if want := commandSeeds[[]int{0, 2, 11}[i]]; !bytes.Equal(got, want) {
			t.Errorf("encoding %x, want %x", got, want)
		}
	}
	if e.StmtID != 1 || e.Flags != CursorTypeReadOnly || e.IterationCount != 1 || !ps.NewParamsBound() ||
		!bytes.Equal(ps.Types, []byte{8, 0, 3, 0}) || len(ps.Values) != 8 {
		t.Errorf("decoded execute %+v %+v", e, ps)
	}
}

// TestMalformedCommands: the errors a short command gets, as clients saw
// them before the decoders moved here.
func TestMalformedCommands(t *testing.T) {
	msg := func(bad *SQLError) string {
		if bad == nil {
			return ""
		}
		if bad.Code != ERMalformedPacket || bad.State != "HY000" {
			t.Errorf("%+v: want %d HY000", bad, ERMalformedPacket)
		}
		return bad.Message
	}
	exec := func(pkt []byte, params uint16) string {
		e, bad := ParseStmtExecute(pkt)
		if bad != nil || params == 0 {
			return msg(bad)
		}
		var ps ExecuteParams
		return msg(ps.Parse(e.Params, params))
	}
	for _, c := range []struct{ got, want string }{
		{exec([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0}, 0), "Malformed COM_STMT_EXECUTE"},
		{exec([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0}, 0), ""},
		{exec([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0}, 1), "Malformed COM_STMT_EXECUTE parameters"},
		{exec([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8}, 1), "Malformed COM_STMT_EXECUTE parameter types"},
		{exec([]byte{ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, 1), ""},
		{msg(second(ParseStmtReset([]byte{ComStmtReset, 1, 0, 0}))), "Malformed COM_STMT_RESET"},
		{msg(second(ParseStmtFetch([]byte{ComStmtFetch, 1, 0, 0, 0, 1, 0, 0}))), "Malformed COM_STMT_FETCH"},
		{msg(second(ParseProcessKill([]byte{ComProcessKill, 1, 0, 0}))), "Malformed COM_PROCESS_KILL"},
		{msg(second(ParseSetOption([]byte{ComSetOption, 1}))), "Malformed COM_SET_OPTION"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func second[T any](_ T, bad *SQLError) *SQLError { return bad }

// TestDecodeAllocs: decoding a well-formed command or reply allocates
// nothing; its slices alias the packet. (Only a malformed one costs its
// error.)
func TestDecodeAllocs(t *testing.T) {
	prep := AppendStmtPrepareOK(nil, StmtPrepareOK{StmtID: 3, Columns: 2, Params: 1})
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = ParseQuery(commandSeeds[0])
		_, _ = ParseInitDB(commandSeeds[1])
		_, _ = ParseFieldList(commandSeeds[2])
		_, _ = ParseProcessKill(commandSeeds[3])
		_, _ = ParseSetOption(commandSeeds[4])
		_, _ = ParseStmtPrepare(commandSeeds[9])
		if e, bad := ParseStmtExecute(commandSeeds[11]); bad == nil {
			var ps ExecuteParams
			_ = ps.Parse(e.Params, 2)
		}
		_, _ = ParseStmtSendLongData(commandSeeds[13])
		_, _ = ParseStmtClose(commandSeeds[14])
		_, _ = ParseStmtReset(commandSeeds[15])
		_, _ = ParseStmtFetch(commandSeeds[16])
		_, _ = ParseStmtPrepareOK(prep)
		_, _ = ParseColumnCount([]byte{3})
	})
	if allocs != 0 {
		t.Errorf("decoding allocates %v times", allocs)
	}
}

func TestReplies(t *testing.T) {
	ok := StmtPrepareOK{StmtID: 0x01020304, Columns: 2, Params: 3, Warnings: 1}
	p := AppendStmtPrepareOK(nil, ok)
	if got, good := ParseStmtPrepareOK(p); !good || got != ok || len(p) != stmtPrepareOKLen {
		t.Errorf("prepare OK %x: %+v", p, got)
	}
	PutStmtID(p, 9)
	if got, _ := ParseStmtPrepareOK(p); got.StmtID != 9 {
		t.Errorf("PutStmtID: %+v", got)
	}
	if p := AppendEOFOK(nil, ServerStatusAutocommit, 0); !IsRowsEnd(p, true) || !IsEOFHeader(p) || IsOKPacket(p) {
		t.Errorf("EOF-OK %x", p)
	}
	if p := AppendEOF(nil, ServerStatusAutocommit, 0); !IsRowsEnd(p, false) || !IsEOF(p) {
		t.Errorf("EOF %x", p)
	}
	f := []byte{1, 0, 0, 7, 0xfe}
	if FrameSeq(f) != 7 || !bytes.Equal(FramePayload(f), []byte{0xfe}) || IsEmptyFrame(f) || !IsEmptyFrame(f[:4]) {
		t.Errorf("frame helpers on %x", f)
	}
}

func FuzzCommands(f *testing.F) {
	for _, s := range commandSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		roundTripCommand(t, pkt)
		if e, bad := ParseStmtExecute(pkt); bad == nil {
			// A parameter count far beyond the packet must not make the
			// decoder allocate or read past it.
			var ps ExecuteParams
			_ = ps.Parse(e.Params, 65535)
		}
	})
}

func FuzzChangeUser(f *testing.F) {
	caps := uint32(ServerCapabilities)
	cu := &ChangeUser{User: "app", AuthResponse: []byte("0123456789"), DB: "shop", Collation: 45,
		Plugin: AuthNativePassword, Attrs: map[string]string{"_client_name": "x"}}
	f.Add(AppendChangeUser(nil, cu, caps), caps)
	f.Add(AppendChangeUser(nil, cu, 0), uint32(0))
	f.Add([]byte{ComChangeUser, 'a', 0, 0}, caps)
	f.Fuzz(func(t *testing.T, pkt []byte, caps uint32) {
		cu, err := ParseChangeUser(pkt, caps)
		if err != nil {
			return
		}
		again, err := ParseChangeUser(AppendChangeUser(nil, cu, caps), caps)
		if err != nil {
			t.Fatalf("%x: encoding does not decode: %v", pkt, err)
		}
		if len(cu.Attrs) == 0 && len(again.Attrs) == 0 {
			cu.Attrs, again.Attrs = nil, nil
		}
		if len(cu.AuthResponse) == 0 && len(again.AuthResponse) == 0 {
			cu.AuthResponse, again.AuthResponse = nil, nil
		}
		if !reflect.DeepEqual(cu, again) {
			t.Fatalf("%x: round trip %+v != %+v", pkt, cu, again)
		}
	})
}

func FuzzReplies(f *testing.F) {
	f.Add(AppendStmtPrepareOK(nil, StmtPrepareOK{StmtID: 1, Columns: 2, Params: 3}))
	f.Add(AppendOK(nil, 1, 2, ServerStatusAutocommit, 0))
	f.Add(AppendEOF(nil, ServerStatusAutocommit, 1))
	f.Add(AppendErr(nil, NewError(1064, "42000", "syntax")))
	f.Add(AppendLocalInfileRequest(nil, LocalInfileRequest{Filename: []byte("/tmp/x")}))
	f.Add([]byte{0xfc, 0x10, 0x01})
	f.Fuzz(func(t *testing.T, p []byte) {
		if ok, good := ParseStmtPrepareOK(p); good {
			if again, _ := ParseStmtPrepareOK(AppendStmtPrepareOK(nil, ok)); again != ok {
				t.Fatalf("prepare OK %x: %+v != %+v", p, ok, again)
			}
		}
		if n, good := ParseColumnCount(p); good {
			if again, _ := ParseColumnCount(AppendColumnCount(nil, n)); again != n {
				t.Fatalf("column count %x: %d != %d", p, n, again)
			}
		}
		if r, good := ParseLocalInfileRequest(p); good {
			again, _ := ParseLocalInfileRequest(AppendLocalInfileRequest(nil, r))
			if !bytes.Equal(r.Filename, again.Filename) {
				t.Fatalf("local infile %x", p)
			}
		}
		if IsEOF(p) {
			e := ParseEOF(p)
			if again := ParseEOF(AppendEOF(nil, e.Status, e.Warnings)); again != e {
				t.Fatalf("EOF %x: %+v != %+v", p, e, again)
			}
		}
		if IsErrPacket(p) {
			e := ParseErr(p)
			if again := ParseErr(AppendErr(nil, e)); !reflect.DeepEqual(e, again) {
				t.Fatalf("ERR %x: %+v != %+v", p, e, again)
			}
		}
		if ok, good := ParseOK(p, false); good && IsOKPacket(p) && !ok.Tail {
			again, good := ParseOK(AppendOK(nil, ok.AffectedRows, ok.LastInsertID, ok.Status, ok.Warnings), false)
			if !good || again.AffectedRows != ok.AffectedRows || again.LastInsertID != ok.LastInsertID ||
				again.Status != ok.Status || again.Warnings != ok.Warnings {
				t.Fatalf("OK %x: %+v != %+v", p, ok, again)
			}
		}
		_, _ = Header(p)
		_ = IsRowsEnd(p, true)
	})
}
