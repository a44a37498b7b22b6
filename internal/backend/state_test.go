package backend

import "testing"

func TestStateSatisfiesAndReplay(t *testing.T) {
	var conn, sess State
	if !conn.Satisfies(&sess) {
		t.Fatal("empty states must match")
	}
	// A connection reset to empty matches a session that never set anything
	// (the hash of no variables is the zero value's).
	var reset State
	reset.Set("x", "1")
	reset.Reset("")
	if !reset.Satisfies(&sess) {
		t.Fatal("a reset state must match the zero state")
	}
	sess.Set("sql_mode", "STRICT_TRANS_TABLES")
	sess.Set("wait_timeout", "100")
	sess.SetSchema("db1")
	if conn.Satisfies(&sess) {
		t.Fatal("different states must not match")
	}
	q := ReplaySQL(&conn, &sess, nil)
	want := "SET SESSION sql_mode = 'STRICT_TRANS_TABLES', wait_timeout = 100"
	if q != want {
		t.Fatalf("replay:\n got %q\nwant %q", q, want)
	}
	conn = sess.Clone()
	if !conn.Satisfies(&sess) || !conn.Equal(&sess) {
		t.Fatal("clone must match")
	}
	// A session without a schema is not served by a connection with one:
	// its unqualified names and DATABASE() would see that schema.
	var noSchema State
	noSchema.Set("sql_mode", "STRICT_TRANS_TABLES")
	noSchema.Set("wait_timeout", "100")
	if conn.Satisfies(&noSchema) {
		t.Fatal("a connection with a schema must not serve a session without one")
	}
	// Reverting: variables the session does not have go back to DEFAULT,
	// character sets to their handshake values.
	conn.Set("character_set_client", "latin1")
	base := map[string]string{"character_set_client": "utf8mb4"}
	q = ReplaySQL(&conn, &noSchema, base)
	if q != "SET SESSION character_set_client = 'utf8mb4'" {
		t.Fatalf("revert: %q", q)
	}
	var plain State
	plain.Set("time_zone", "+00:00")
	var empty State
	if q := ReplaySQL(&plain, &empty, nil); q != "SET SESSION time_zone = DEFAULT" {
		t.Fatalf("default: %q", q)
	}
}

func TestReplayQuotes(t *testing.T) {
	var from, to State
	to.Set("x", `it's \ odd`)
	to.Set("n", "-1.5")
	q := ReplaySQL(&from, &to, nil)
	if q != `SET SESSION n = -1.5, x = 'it\'s \\ odd'` {
		t.Fatalf("quoting: %q", q)
	}
}

func TestIsMySQL(t *testing.T) {
	for v, want := range map[string]bool{
		"5.5.5-10.11.19-MariaDB-0+deb12u1": false,
		"11.4.2-MariaDB-log":               false,
		"8.0.36":                           true,
		"8.4.0-commercial":                 true,
		"5.7.44-48-log":                    true, // Percona Server
		"":                                 false,
	} {
		if got := IsMySQL(v); got != want {
			t.Errorf("IsMySQL(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestPickIdle(t *testing.T) {
	mk := func(schema string) *Conn {
		c := &Conn{}
		c.State.SetSchema(schema)
		return c
	}
	var a, b, none State
	a.SetSchema("a")
	b.SetSchema("b")
	l := []*Conn{mk(""), mk("a"), mk("b"), mk("b")}
	if i := pickIdle(l, &a); i != 1 {
		t.Errorf("want the connection already in schema a, got %d", i)
	}
	if i := pickIdle(l, &b); i != 3 {
		t.Errorf("want the newest connection in schema b, got %d", i)
	}
	if i := pickIdle(l, &none); i != 0 {
		t.Errorf("a session without a schema needs a connection without one, got %d", i)
	}
	if i := pickIdle(l[1:], &none); i != -1 {
		t.Errorf("no connection without a schema: want -1, got %d", i)
	}
	if i := pickIdle(l, nil); i != 3 {
		t.Errorf("no state wanted: the newest, got %d", i)
	}
	var c State
	c.SetSchema("c")
	if i := pickIdle(l, &c); i != 3 {
		t.Errorf("no connection in schema c: the newest (COM_INIT_DB follows), got %d", i)
	}
	if got := removeAt(l, 1); len(got) != 3 || got[0].State.Schema != "" || got[1].State.Schema != "b" {
		t.Errorf("removeAt kept the wrong order")
	}
}
