package sqlscan

import "testing"

func TestKillTarget(t *testing.T) {
	tests := []struct {
		q     string
		id    uint64
		query bool
		ok    bool
	}{
		{"KILL 5", 5, false, true},
		{"kill 42;", 42, false, true},
		{"KILL CONNECTION 7", 7, false, true},
		{"KILL QUERY 8", 8, true, true},
		{"kill query 8 ; ", 8, true, true},
		{"KILL HARD QUERY 9", 9, true, true},
		{"KILL SOFT CONNECTION 10", 10, false, true},
		{"/* c */ KILL /*! QUERY */ 11 -- x", 11, true, true},
		{"KILL 18446744073709551615", 18446744073709551615, false, true},
		{"KILL 18446744073709551616", 0, false, false},
		{"KILL QUERY ID 5", 0, false, false},
		{"KILL USER bob", 0, false, false},
		{"KILL 1.5", 0, false, false},
		{"KILL 1e3", 0, false, false},
		{"KILL 0x10", 0, false, false},
		{"KILL -5", 0, false, false},
		{"KILL 5; SELECT 1", 0, false, false},
		{"KILL", 0, false, false},
		{"KILL CONNECTION_ID()", 0, false, false},
		{"SELECT 5", 0, false, false},
		{"", 0, false, false},
	}
	for _, tt := range tests {
		id, query, ok := Scan([]byte(tt.q)).KillTarget()
		if id != tt.id || query != tt.query || ok != tt.ok {
			t.Errorf("Scan(%q).KillTarget() = %d, %v, %v; want %d, %v, %v", tt.q, id, query, ok, tt.id, tt.query, tt.ok)
		}
	}
}
