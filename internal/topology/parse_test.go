package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadTSV reads a `mariadb --batch` capture: header row, tab-separated
// values, NULL as "NULL" (returned as "" like backend.Conn.Exec does).
func loadTSV(t *testing.T, name string) (cols []string, rows [][]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) == 0 || lines[0] == "" {
		return nil, nil
	}
	unescape := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\0`, "\x00")
	for i, l := range lines {
		f := strings.Split(l, "\t")
		for j := range f {
			if i > 0 && f[j] == "NULL" {
				f[j] = ""
				continue
			}
			f[j] = unescape.Replace(f[j])
		}
		if i == 0 {
			cols = f
			continue
		}
		rows = append(rows, f)
	}
	return cols, rows
}

func replicaFixture(t *testing.T, name string) ReplicaStatus {
	t.Helper()
	cols, rows := loadTSV(t, name)
	if len(rows) != 1 {
		t.Fatalf("%s: %d rows", name, len(rows))
	}
	return ParseReplicaStatus(cols, rows[0])
}

func TestParseReplicaStatusMariaDB(t *testing.T) {
	for _, name := range []string{"mariadb-10.11-slave-status-running.tsv", "mariadb-10.11-replica-status-running.tsv"} {
		rs := replicaFixture(t, name)
		if rs.IORunning != IOYes || !rs.SQLRunning || !rs.Running() {
			t.Errorf("%s: threads %v %v", name, rs.IORunning, rs.SQLRunning)
		}
		if rs.SecondsBehind != 0 || rs.UsingGTID != "Slave_Pos" || rs.GTIDIOPos != "0-1-3,2-1-1" {
			t.Errorf("%s: %+v", name, rs)
		}
		if rs.SourceHost != "127.0.0.1" || rs.SourcePort == 0 || rs.SourceServerID != 1 || rs.SourceUser != "repl" {
			t.Errorf("%s: source %+v", name, rs)
		}
		if rs.SQLDelay != 0 || rs.SQLRemainingDelay != -1 || rs.LastIOErrno != 0 || rs.LastSQLErrno != 0 {
			t.Errorf("%s: %+v", name, rs)
		}
		if rs.SourceLogFile != "mysql-bin.000001" || rs.ReadSourceLogPos == 0 || rs.ExecSourceLogPos != rs.ReadSourceLogPos {
			t.Errorf("%s: binlog coordinates %+v", name, rs)
		}
	}
}

func TestParseReplicaStatusMariaDBFailures(t *testing.T) {
	rs := replicaFixture(t, "mariadb-10.11-slave-status-sql-stopped.tsv")
	if rs.IORunning != IOYes || rs.SQLRunning || rs.SecondsBehind != -1 || rs.LastSQLErrno != 0 {
		t.Errorf("sql stopped: %+v", rs)
	}

	rs = replicaFixture(t, "mariadb-10.11-slave-status-sql-error.tsv")
	if rs.SQLRunning || rs.LastSQLErrno != 1062 || !strings.Contains(rs.LastSQLError, "Duplicate entry") {
		t.Errorf("sql error: %+v", rs)
	}

	rs = replicaFixture(t, "mariadb-10.11-slave-status-io-connecting.tsv")
	if rs.IORunning != IOConnecting || !rs.SQLRunning || rs.LastIOErrno != 2003 || rs.SecondsBehind != -1 {
		t.Errorf("io connecting: %+v", rs)
	}
	if !strings.Contains(rs.LastIOError, "Connection refused") {
		t.Errorf("io error %q", rs.LastIOError)
	}

	rs = replicaFixture(t, "mariadb-10.11-slave-status-delayed.tsv")
	if rs.SQLDelay != 3 || rs.SQLRemainingDelay < 0 || rs.SecondsBehind < 1 || !rs.Running() {
		t.Errorf("delayed: %+v", rs)
	}

	cols, rows := loadTSV(t, "mariadb-10.11-slave-status-primary.tsv")
	if len(cols) != 0 || len(rows) != 0 {
		t.Errorf("a primary has no replica status, got %v %v", cols, rows)
	}
}

func TestParseReplicaStatusMySQL8(t *testing.T) {
	rs := replicaFixture(t, "mysql-8.0-replica-status-running.tsv")
	if !rs.Running() || rs.SecondsBehind != 7 || rs.UsingGTID != "Auto_Position" || rs.SourcePort != 13000 {
		t.Errorf("running: %+v", rs)
	}
	if rs.SourceUUID != "3e11fa47-71ca-11e1-9e33-c80aa9429562" || rs.SourceServerID != 1 {
		t.Errorf("source: %+v", rs)
	}
	want := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5,4a6b2c5d-71ca-11e1-9e33-c80aa9429562:1-3"
	if rs.ExecutedGTIDSet != want || rs.RetrievedGTIDSet != "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5" {
		t.Errorf("gtid sets %q %q", rs.ExecutedGTIDSet, rs.RetrievedGTIDSet)
	}
	if ok, err := MySQLGTIDSetContains(rs.ExecutedGTIDSet, rs.RetrievedGTIDSet); err != nil || !ok {
		t.Errorf("executed should contain retrieved: %v %v", ok, err)
	}
	if rs.SourceLogFile != "source-bin.000002" || rs.ReadSourceLogPos != 1307 || rs.RelaySourceLogFile != "source-bin.000002" {
		t.Errorf("coordinates: %+v", rs)
	}

	rs = replicaFixture(t, "mysql-8.0-replica-status-broken.tsv")
	if rs.SQLRunning || rs.IORunning != IOConnecting || rs.LastSQLErrno != 1062 || rs.LastIOErrno != 2003 {
		t.Errorf("broken: %+v", rs)
	}
	if rs.SQLDelay != 3600 || rs.SecondsBehind != -1 || rs.UsingGTID != "No" || rs.ConnectionName != "east" {
		t.Errorf("broken: %+v", rs)
	}
}

func TestParseReplicaStatusUnknownAndShortRows(t *testing.T) {
	rs := ParseReplicaStatus([]string{"Slave_IO_Running", "Some_Future_Column", "Seconds_Behind_Master"}, []string{"Yes", "x"})
	if rs.IORunning != IOYes || rs.SecondsBehind != -1 {
		t.Errorf("%+v", rs)
	}
}

func TestParseWsrepStatus(t *testing.T) {
	_, rows := loadTSV(t, "mariadb-10.11-wsrep-status-synced.tsv")
	_, vars := loadTSV(t, "mariadb-10.11-wsrep-vars-synced.tsv")
	m := StatusMap(append(rows, vars...))
	w := ParseWsrepStatus(m)
	if !w.Synced() || !w.Primary() || !w.Ready || !w.Connected || !w.On || w.Desync || w.RejectingQueries() {
		t.Errorf("synced: %+v", w)
	}
	if w.ClusterSize != 3 || w.LocalIndex != 1 || w.LocalStateComment != "Synced" || w.LocalRecvQueue != 0 || w.SSTDonorRejectsQueries {
		t.Errorf("synced: %+v", w)
	}
	if w.ClusterStateUUID == "" {
		t.Error("cluster state uuid missing")
	}

	_, rows = loadTSV(t, "mariadb-10.11-wsrep-status-desynced.tsv")
	w = ParseWsrepStatus(StatusMap(rows))
	if w.Synced() || !w.Donor() || w.LocalStateComment != "Donor/Desynced" || !w.Ready || !w.Primary() {
		t.Errorf("desynced: %+v", w)
	}

	_, rows = loadTSV(t, "mariadb-10.11-wsrep-status-non-primary.tsv")
	w = ParseWsrepStatus(StatusMap(rows))
	if w.Synced() || w.Primary() || w.Ready || w.ClusterStatus != "non-Primary" || w.ClusterSize != 1 {
		t.Errorf("non-primary: %+v", w)
	}

	w = ParseWsrepStatus(map[string]string{"wsrep_on": "OFF", "wsrep_reject_queries": "all", "wsrep_desync": "ON"})
	if w.On || !w.RejectingQueries() || !w.Desync || w.LocalIndex != -1 {
		t.Errorf("vars: %+v", w)
	}
}

func TestParseSemiSyncStatus(t *testing.T) {
	_, rows := loadTSV(t, "mariadb-10.11-semisync-status-primary.tsv")
	s := ParseSemiSyncStatus(StatusMap(rows))
	if !s.Known || !s.SourceOn || s.Clients != 2 || s.NoTx != 0 || s.ReplicaOn {
		t.Errorf("mariadb: %+v", s)
	}
	_, rows = loadTSV(t, "mysql-8.0-semisync-status-source.tsv")
	s = ParseSemiSyncStatus(StatusMap(rows))
	if !s.Known || !s.SourceOn || s.Clients != 1 || s.NoTx != 3 || s.ReplicaOn {
		t.Errorf("mysql: %+v", s)
	}
	if s := ParseSemiSyncStatus(nil); s.Known {
		t.Errorf("empty: %+v", s)
	}
}

func TestConnectionStatus(t *testing.T) {
	c := ParseConnectionStatus(StatusMap([][]string{{"Threads_connected", "6"}, {"Connection_errors_max_connections", "3"}}), 5)
	if !c.Full() || c.RefusedTotal != 3 {
		t.Errorf("%+v", c)
	}
	c = ParseConnectionStatus(nil, -1)
	if c.Full() || c.ThreadsConnected != -1 {
		t.Errorf("%+v", c)
	}
}

func TestParseBool(t *testing.T) {
	for v, want := range map[string]bool{"ON": true, "on": true, "1": true, "Yes": true, "OFF": false, "0": false, "": false,
		"NO_LOCK": true, "NONE": false, "true": true} {
		if ParseBool(v) != want {
			t.Errorf("ParseBool(%q) = %v", v, !want)
		}
	}
}

func TestFlavorAndVersion(t *testing.T) {
	if FlavorOf("5.5.5-10.11.19-MariaDB-0+deb12u1-log") != FlavorMariaDB || FlavorOf("8.0.36") != FlavorMySQL || FlavorOf("") != FlavorUnknown {
		t.Error("FlavorOf")
	}
	cases := []struct {
		v    string
		want bool
	}{{"8.0.22", true}, {"8.0.21-log", false}, {"8.4.0", true}, {"5.7.44", false}, {"5.5.5-10.11.19-MariaDB", true}, {"10.4.1", true}}
	for _, c := range cases {
		if got := VersionAtLeast(c.v, 8, 0, 22); got != c.want {
			t.Errorf("VersionAtLeast(%q) = %v", c.v, got)
		}
	}
}

func TestGTIDPos(t *testing.T) {
	p, err := ParseGTIDPos("2-1-1, 0-1-3")
	if err != nil || p.String() != "0-1-3,2-1-1" {
		t.Fatalf("%v %v", p, err)
	}
	if s, ok := p.Seq(2); !ok || s != 1 {
		t.Error("Seq")
	}
	if _, ok := p.Seq(7); ok {
		t.Error("Seq of a missing domain")
	}
	// gtid_binlog_pos lists one GTID per server id; the highest wins.
	b := MustParseGTIDPos("0-1-10,0-2-12")
	if b.String() != "0-2-12" {
		t.Errorf("binlog pos %v", b)
	}
	if q, err := ParseGTIDPos(""); err != nil || q != nil {
		t.Error("empty position")
	}
	for _, bad := range []string{"0-1", "a-b-c", "0-1-2-3", "1-99999999999-1"} {
		if _, err := ParseGTIDPos(bad); err == nil {
			t.Errorf("ParseGTIDPos(%q) accepted", bad)
		}
	}

	cases := []struct {
		a, b   string
		atLeas bool
		behind uint64
	}{
		{"0-1-10", "0-1-10", true, 0},
		{"0-1-10", "0-1-9", true, 0},
		{"0-1-9", "0-1-10", false, 1},
		{"0-2-10", "0-1-8", true, 0}, // another server wrote later transactions of domain 0
		{"0-1-10", "0-1-5,1-1-1", false, 1},
		{"0-1-10,1-1-4", "0-1-5,1-1-1", true, 0},
		{"", "0-1-5", false, 5},
		{"0-1-5", "", true, 0},
	}
	for _, c := range cases {
		a, b := MustParseGTIDPos(c.a), MustParseGTIDPos(c.b)
		if got := a.AtLeast(b); got != c.atLeas {
			t.Errorf("%q AtLeast %q = %v", c.a, c.b, got)
		}
		if got := a.Behind(b); got != c.behind {
			t.Errorf("%q Behind %q = %d", c.a, c.b, got)
		}
	}
}

func TestMySQLGTIDSetContains(t *testing.T) {
	a := "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-10,4a6b2c5d-71ca-11e1-9e33-c80aa9429562:1-3"
	if ok, err := MySQLGTIDSetContains(a, "3e11fa47-71ca-11e1-9e33-c80aa9429562:2-8"); err != nil || !ok {
		t.Errorf("%v %v", ok, err)
	}
	if ok, _ := MySQLGTIDSetContains(a, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-11"); ok {
		t.Error("should not contain 1-11")
	}
	if _, err := MySQLGTIDSetContains("nonsense", a); err == nil {
		t.Error("bad set accepted")
	}
}

func TestGTIDStateString(t *testing.T) {
	g := GTIDState{Current: MustParseGTIDPos("0-1-3")}
	if g.String() != "0-1-3" {
		t.Error(g.String())
	}
	g.Executed = "uuid:1-3"
	if g.String() != "uuid:1-3" {
		t.Error(g.String())
	}
}

func TestApplied(t *testing.T) {
	for _, c := range []struct {
		pos, gtid string
		want      bool
	}{
		{"0-1-42", "0-1-42", true},
		{"0-1-45,1-2-7", "0-1-42", true},
		{"0-1-41", "0-1-42", false},
		{"1-2-99", "0-1-42", false},
		{"", "0-1-42", false},
		{"0-1-42", "", false},
		{"garbage", "0-1-42", false},
		{"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-77", "3e11fa47-71ca-11e1-9e33-c80aa9429562:77", true},
		{"3e11fa47-71ca-11e1-9e33-c80aa9429562:1-76", "3e11fa47-71ca-11e1-9e33-c80aa9429562:77", false},
	} {
		if got := Applied(c.pos, c.gtid); got != c.want {
			t.Errorf("Applied(%q, %q) = %v, want %v", c.pos, c.gtid, got, c.want)
		}
	}
}
