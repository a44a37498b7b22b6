package sqlscan

import (
	"fmt"
	"testing"
)

func TestSetAssignments(t *testing.T) {
	tests := []struct{ q, want string }{
		{"SET sql_mode = 'ANSI', session_track_system_variables = ''", "[sql_mode session_track_system_variables]"},
		{"SET SESSION a = 1, @u = 2, GLOBAL b = 3, c = 4", "[a]"},
		{"SET @@session.Sql_Mode = CONCAT(@@sql_mode, ',ANSI'), @@x = f(1, 2)", "[sql_mode x]"},
		{"SET NAMES utf8mb4 COLLATE utf8mb4_bin, time_zone = '+00:00'", "[character_set_client character_set_connection character_set_results collation_connection time_zone]"},
		{"SET CHARACTER SET koi8r", "[character_set_client character_set_connection character_set_results collation_connection]"},
		{"SET @x = 1", "[]"},
		{"SET GLOBAL max_connections = 10", "[]"},
		{"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", "[]"},
		{"SELECT 1", "[]"},
	}
	for _, tc := range tests {
		if got := fmt.Sprint(SetAssignments([]byte(tc.q))); got != tc.want {
			t.Errorf("SetAssignments(%q) = %s, want %s", tc.q, got, tc.want)
		}
	}
}

func TestQualifySessionSets(t *testing.T) {
	for q, want := range map[string]string{
		"SET @@sql_mode = 'ANSI'":                                 "SET @@SESSION.sql_mode = 'ANSI'",
		"SET @@collation_connection=ucs2_general_ci, @@x = @@y":   "SET @@SESSION.collation_connection=ucs2_general_ci, @@SESSION.x = @@y",
		"SET GLOBAL a = 1, @@b = 2":                               "SET GLOBAL a = 1, @@SESSION.b = 2", // @@b is the session's, as on the server
		"set @@session.sql_mode = '', @@global.max_connections=5": "",
		"SET sql_mode = ''":                                       "",
		"SET @a = @@sql_mode":                                     "",
		"SELECT @@sql_mode":                                       "",
		"SET STATEMENT @@max_statement_time=1 FOR SELECT 1":       "",
	} {
		info := Scan([]byte(q))
		got, ok := info.QualifySessionSets(nil, []byte(q))
		if want == "" {
			if ok {
				t.Errorf("QualifySessionSets(%q) = %q, want unchanged", q, got)
			}
			continue
		}
		if !ok || string(got) != want {
			t.Errorf("QualifySessionSets(%q) = %q, %v; want %q", q, got, ok, want)
		}
	}
}
