package bench

import (
	"strings"
	"testing"
)

func TestParseScenarios(t *testing.T) {
	names := func(sc []Scenario) string {
		var n []string
		for _, s := range sc {
			n = append(n, s.Name)
		}
		return strings.Join(n, ",")
	}
	tests := []struct {
		in, want, err string
	}{
		{"", "oltp_point_select,oltp_read_only,oltp_read_write,oltp_insert,conn_churn,many_clients,rules_scaling,failover", ""},
		{"churn,clients,rules,failover", "conn_churn,many_clients,rules_scaling,failover", ""},
		{"point_select,read_only", "oltp_point_select,oltp_read_only", ""},
		{" read_only , oltp_point_select,read_only", "oltp_read_only,oltp_point_select", ""},
		{"read_write", "oltp_read_write", ""},
		{"nope", "", `unknown scenario "nope"`},
		{",", "", "no scenario"},
	}
	for _, tt := range tests {
		got, err := ParseScenarios(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || names(got) != tt.want {
			t.Errorf("%q: got %s, %v; want %s", tt.in, names(got), err, tt.want)
		}
	}
	ro, _ := ParseScenarios("read_only")
	if strings.Join(ro[0].Args, " ") != "--skip_trx=on" {
		t.Errorf("read_only args %q", ro[0].Args)
	}
	if got := names(QuickScenarios()); got != "oltp_point_select,oltp_read_only,conn_churn,many_clients,failover" {
		t.Errorf("quick scenarios %s", got)
	}
	// Scenarios returns a fresh list: changing it changes nothing else.
	s := Scenarios()
	s[0].Name = "changed"
	if Scenarios()[0].Name != "oltp_point_select" {
		t.Error("Scenarios shares its list")
	}
}
