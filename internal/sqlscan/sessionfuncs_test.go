package sqlscan

import "testing"

func TestRewriteSessionFuncs(t *testing.T) {
	v := SessionValues{RowCount: -1, FoundRows: 7, LastInsertID: 42, ConnectionID: 9,
		Track: map[string]string{"session_track_system_variables": "autocommit,x'y"}}
	all := FlagRowCount | FlagFoundRows | FlagLastInsertID | FlagConnectionID | FlagSessionTrack
	tests := []struct{ in, want string }{
		{"SELECT ROW_COUNT()", "SELECT COALESCE(-1,ROW_COUNT()) AS `ROW_COUNT()`"},
		{"select row_count( ) as rc", "select COALESCE(-1,ROW_COUNT()) as rc"},
		{"SELECT row_count() rc", "SELECT COALESCE(-1,ROW_COUNT()) rc"},
		{"SELECT ROW_COUNT(), FOUND_ROWS(), LAST_INSERT_ID()",
			"SELECT COALESCE(-1,ROW_COUNT()) AS `ROW_COUNT()`, COALESCE(7,FOUND_ROWS()) AS `FOUND_ROWS()`, COALESCE(CAST(42 AS UNSIGNED),LAST_INSERT_ID()) AS `LAST_INSERT_ID()`"},
		{"SELECT DISTINCT last_insert_id() FROM t", "SELECT DISTINCT COALESCE(CAST(42 AS UNSIGNED),LAST_INSERT_ID()) AS `last_insert_id()` FROM t"},
		{"SELECT ROW_COUNT() + 1", "SELECT COALESCE(-1,ROW_COUNT()) + 1 AS `ROW_COUNT() + 1`"},
		{"select @a - connection_id(), 2", "select @a - COALESCE(CAST(9 AS UNSIGNED),CONNECTION_ID()) AS `@a - connection_id()`, 2"},
		{"SELECT ROW_COUNT() + 1 AS n", "SELECT COALESCE(-1,ROW_COUNT()) + 1 AS n"},
		{"SELECT ROW_COUNT() + 1 n, `x`", "SELECT COALESCE(-1,ROW_COUNT()) + 1 n, `x`"},
		{"SELECT CAST(ROW_COUNT() AS CHAR) FROM t", "SELECT CAST(COALESCE(-1,ROW_COUNT()) AS CHAR) AS `CAST(ROW_COUNT() AS CHAR)` FROM t"},
		{"SELECT a FROM t WHERE id = LAST_INSERT_ID()", "SELECT a FROM t WHERE id = COALESCE(CAST(42 AS UNSIGNED),LAST_INSERT_ID())"},
		{"SELECT @@identity", "SELECT COALESCE(CAST(42 AS UNSIGNED),@@identity) AS `@@identity`"},
		{"SELECT @@session.last_insert_id, 'ROW_COUNT()'", "SELECT COALESCE(CAST(42 AS UNSIGNED),@@session.last_insert_id) AS `@@session.last_insert_id`, 'ROW_COUNT()'"},
		{"(SELECT ROW_COUNT())", "(SELECT COALESCE(-1,ROW_COUNT()) AS `ROW_COUNT()`)"},
		{"INSERT INTO t VALUES (LAST_INSERT_ID())", "INSERT INTO t VALUES (COALESCE(CAST(42 AS UNSIGNED),LAST_INSERT_ID()))"},
		{"SELECT 1, (SELECT ROW_COUNT())", "SELECT 1, (SELECT COALESCE(-1,ROW_COUNT())) AS `(SELECT ROW_COUNT())`"},
		{"SELECT CONNECTION_ID()", "SELECT COALESCE(CAST(9 AS UNSIGNED),CONNECTION_ID()) AS `CONNECTION_ID()`"},
		{"SELECT @@pseudo_thread_id", "SELECT COALESCE(9,@@pseudo_thread_id) AS `@@pseudo_thread_id`"},
		{"select @@session_track_system_variables", "select COALESCE('autocommit,x''y',@@session_track_system_variables) AS `@@session_track_system_variables`"},
	}
	for _, tc := range tests {
		got, ok := RewriteSessionFuncs(nil, []byte(tc.in), v, all)
		if !ok || string(got) != tc.want {
			t.Errorf("RewriteSessionFuncs(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
	for _, q := range []string{"SELECT LAST_INSERT_ID(5)", "SELECT 'ROW_COUNT()' /* FOUND_ROWS() */", "SELECT @@global.identity", "SELECT 1"} {
		if got, ok := RewriteSessionFuncs(nil, []byte(q), v, all); ok {
			t.Errorf("RewriteSessionFuncs(%q) = %q, want no change", q, got)
		}
	}
}

func TestRewriteSessionFuncsWhich(t *testing.T) {
	v := SessionValues{RowCount: 3, ConnectionID: 9}
	got, ok := RewriteSessionFuncs(nil, []byte("SELECT ROW_COUNT(), CONNECTION_ID()"), v, FlagConnectionID)
	if want := "SELECT ROW_COUNT(), COALESCE(CAST(9 AS UNSIGNED),CONNECTION_ID()) AS `CONNECTION_ID()`"; !ok || string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, ok := RewriteSessionFuncs(nil, []byte("SELECT ROW_COUNT()"), v, FlagConnectionID); ok {
		t.Fatalf("ROW_COUNT() rewritten without FlagRowCount: %q", got)
	}
}

func TestSetsInsertIDUnseen(t *testing.T) {
	for q, want := range map[string]bool{
		"CALL p(1)":                                true,
		"LOAD DATA INFILE 'x' INTO TABLE t":        true,
		"load xml local infile 'x' into table t":   true,
		"EXECUTE s USING @a":                       true,
		"INSERT INTO t VALUES (1); SELECT 1":       true,
		"SELECT LAST_INSERT_ID(5)":                 true,
		"UPDATE t SET id = LAST_INSERT_ID(id + 1)": true,
		"SET @@last_insert_id = 7":                 true,
		"SET last_insert_id = 7":                   true,
		"SELECT LAST_INSERT_ID()":                  false,
		"SELECT last_insert_id ( )":                false,
		"INSERT INTO t VALUES (1)":                 false,
		"SELECT 'LAST_INSERT_ID(5)'":               false,
		"SELECT @@last_insert_id":                  false,
	} {
		if got := Scan([]byte(q)).SetsInsertIDUnseen(); got != want {
			t.Errorf("SetsInsertIDUnseen(%q) = %v, want %v", q, got, want)
		}
	}
}
