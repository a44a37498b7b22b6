package failover

import (
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

func maria(s string) position { return mariaPos(topology.MustParseGTIDPos(s)) }

const uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
const uuidB = "bbbbbbbb-71ca-11e1-9e33-c80aa9429562"

func TestPositions(t *testing.T) {
	for _, c := range []struct {
		name          string
		p, q          position
		contains      bool
		missing       uint64 // transactions of q that p lacks
		extra         string // what p has that q lacks
		union         string
		equalExpected bool
	}{
		{"maria equal", maria("0-1-10"), maria("0-1-10"), true, 0, "", "0-1-10", true},
		{"maria ahead", maria("0-1-12"), maria("0-1-10"), true, 0, "domain 0 sequences 11..12 (last 0-1-12)", "0-1-12", false},
		{"maria behind", maria("0-1-10"), maria("0-1-12"), false, 2, "", "0-1-12", false},
		{"maria one ahead", maria("0-1-11"), maria("0-1-10"), true, 0, "0-1-11", "0-1-11", false},
		{"maria extra domain", maria("0-1-10,2-5-3"), maria("0-1-10"), true, 0, "domain 2 up to 2-5-3 (the other has nothing of domain 2)", "0-1-10,2-5-3", false},
		{"maria same seq, other server", maria("0-2-10"), maria("0-1-10"), false, 0, "0-2-10 (the other has 0-1-10)", "0-2-10", false},
		{"maria empty", maria(""), maria("0-1-3"), false, 3, "", "0-1-3", false},
		{"mysql subset", mysqlPos(uuidA + ":1-10"), mysqlPos(uuidA + ":1-5"), true, 0, uuidA + ":6-10", uuidA + ":1-10", false},
		{"mysql hole", mysqlPos(uuidA + ":1-5:8-10"), mysqlPos(uuidA + ":1-10"), false, 2, "", uuidA + ":1-10", false},
		{"mysql other uuid", mysqlPos(uuidA + ":1-10," + uuidB + ":1-2"), mysqlPos(uuidA + ":1-10"), true, 0, uuidB + ":1-2",
			uuidA + ":1-10," + uuidB + ":1-2", false},
		{"mysql empty", mysqlPos(""), mysqlPos(uuidA + ":1-4"), false, 4, "", uuidA + ":1-4", false},
		{"flavors never compare", maria("0-1-10"), mysqlPos(uuidA + ":1-4"), false, 0, "", "0-1-10", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.contains(c.q); got != c.contains {
				t.Errorf("contains = %v", got)
			}
			if got := c.p.missing(c.q); got != c.missing {
				t.Errorf("missing = %d, want %d", got, c.missing)
			}
			if got := c.p.extra(c.q); got != c.extra {
				t.Errorf("extra = %q, want %q", got, c.extra)
			}
			if got := c.p.union(c.q).String(); got != c.union {
				t.Errorf("union = %q, want %q", got, c.union)
			}
			if got := c.p.equal(c.q); got != c.equalExpected {
				t.Errorf("equal = %v", got)
			}
		})
	}
	if p := mysqlPos("garbage"); p.bad == "" || p.contains(mysqlPos("")) {
		t.Errorf("a bad set must be marked and contain nothing: %+v", p)
	}
}

func TestMinusIntervals(t *testing.T) {
	iv := func(pairs ...int64) gomysql.IntervalSlice {
		var s gomysql.IntervalSlice
		for i := 0; i < len(pairs); i += 2 {
			s = append(s, gomysql.Interval{Start: pairs[i], Stop: pairs[i+1]})
		}
		return s
	}
	for _, c := range []struct{ a, b, want gomysql.IntervalSlice }{
		{iv(1, 11), nil, iv(1, 11)},
		{iv(1, 11), iv(1, 11), nil},
		{iv(1, 11), iv(3, 5), iv(1, 3, 5, 11)},
		{iv(1, 11), iv(0, 4, 8, 20), iv(4, 8)},
		{iv(1, 4, 6, 9), iv(3, 7), iv(1, 3, 7, 9)},
		{iv(5, 6), iv(1, 2), iv(5, 6)},
	} {
		got := minusIntervals(c.a, c.b)
		if len(got) != len(c.want) {
			t.Errorf("%v - %v = %v, want %v", c.a, c.b, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%v - %v = %v, want %v", c.a, c.b, got, c.want)
			}
		}
	}
}

func TestRelayPending(t *testing.T) {
	o := &topology.Observation{OK: true, Flavor: topology.FlavorMariaDB,
		GTID:    topology.GTIDState{Current: topology.MustParseGTIDPos("0-1-5"), Slave: topology.MustParseGTIDPos("0-1-5")},
		Replica: &topology.ReplicaStatus{GTIDIOPos: "0-1-5"}}
	if relayPending(o) {
		t.Error("caught up replica reported pending")
	}
	o.Replica.GTIDIOPos = "0-1-6"
	if !relayPending(o) {
		t.Error("Gtid_IO_Pos ahead not pending")
	}
	o.Replica = &topology.ReplicaStatus{SourceLogFile: "b.2", RelaySourceLogFile: "b.1", ReadSourceLogPos: 4, ExecSourceLogPos: 900}
	if !relayPending(o) {
		t.Error("executing an older binlog file not pending")
	}
	o.Replica = nil
	if relayPending(o) {
		t.Error("a non-replica has no relay log")
	}
}

func TestSeries(t *testing.T) {
	for v, want := range map[string][2]int{"5.5.5-10.11.6-MariaDB-0+deb12u1": {10, 11}, "8.0.36": {8, 0}, "11.4.2-MariaDB": {11, 4}} {
		if got, ok := series(v); !ok || got != want {
			t.Errorf("series(%q) = %v %v", v, got, ok)
		}
	}
	if _, ok := series("garbage"); ok {
		t.Error("garbage has a series")
	}
}

func TestExtraBothFlavours(t *testing.T) {
	for _, c := range []struct {
		f           topology.Flavor
		have, other string
		want        string
	}{
		{topology.FlavorMariaDB, "0-1-100", "0-1-100", ""},
		{topology.FlavorMariaDB, "0-1-100", "0-1-90", "domain 0 sequences 91..100 (last 0-1-100)"},
		{topology.FlavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7", ""},
		{topology.FlavorMySQL, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-7", "3e11fa47-71ca-11e1-9e33-c80aa9429562:8-9"},
	} {
		got, err := Extra(c.f, c.have, c.other)
		if err != nil || got != c.want {
			t.Errorf("Extra(%v, %s, %s) = %q, %v; want %q", c.f, c.have, c.other, got, err, c.want)
		}
	}
	if _, err := Extra(topology.FlavorMariaDB, "zz", "0-1-1"); err == nil {
		t.Error("a malformed position compares")
	}
}

// The statements a repoint runs are the ones the plan shows, with the
// account masked; quotes in a password cannot end the literal.
func TestRepointSQL(t *testing.T) {
	run := RepointSQL(flavor.MariaDB, "127.0.0.1:3307", "repl", `p'w\`, ModeCurrentPos)
	shown := RepointSQL(flavor.MariaDB, "127.0.0.1:3307", "", "", ModeCurrentPos)
	if run[1] != `CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=3307, MASTER_USER='repl', MASTER_PASSWORD='p\'w\\', MASTER_USE_GTID=current_pos, MASTER_HEARTBEAT_PERIOD=0.25, MASTER_CONNECT_RETRY=1` {
		t.Errorf("run: %s", run[1])
	}
	if !strings.Contains(shown[1], "MASTER_USER='…', MASTER_PASSWORD='…'") || strings.Replace(shown[1], "MASTER_USER='…', MASTER_PASSWORD='…'", "", 1) != strings.Replace(run[1], `MASTER_USER='repl', MASTER_PASSWORD='p\'w\\'`, "", 1) {
		t.Errorf("shown %s\nrun   %s", shown[1], run[1])
	}
	my := RepointSQL(flavor.MySQL80, "db:3306", "repl", "pw", ModeSlavePos)
	if my[1] != "CHANGE REPLICATION SOURCE TO SOURCE_HOST='db', SOURCE_PORT=3306, SOURCE_USER='repl', SOURCE_PASSWORD='pw', SOURCE_AUTO_POSITION=1" || my[0] != "STOP REPLICA" {
		t.Errorf("mysql: %q", my)
	}
}

// A refusal names every transaction of a (domain, server) pair beyond the
// other's last, not only the last one.
func TestBinlogStateExtraRange(t *testing.T) {
	list := func(s string) []topology.GTID {
		l, err := topology.ParseGTIDList(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	got := binlogStateExtra(list("0-2-50"), list("0-2-48,0-3-60"))
	if got != "0-2-49..50 (the other's last of server 2 is 0-2-48)" {
		t.Errorf("%q", got)
	}
}

// ErrantOf finds what a replica holds that the primary lacks, and
// compares only checks that cannot have read the replica after the
// primary.
func TestErrantOf(t *testing.T) {
	t0 := time.Unix(1000, 0)
	obs := func(pos string, start, took time.Duration) *topology.Observation {
		return &topology.Observation{OK: true, Time: t0.Add(start), Took: took,
			GTID: topology.GTIDState{Current: topology.MustParseGTIDPos(pos)}}
	}
	primary := obs("0-1-100", 10*time.Millisecond, 2*time.Millisecond)
	for _, tc := range []struct {
		name    string
		replica *topology.Observation
		primary *topology.Observation
		extra   string
		ok      bool
	}{
		{"behind: nothing errant", obs("0-1-90", 0, time.Millisecond), primary, "", true},
		{"own write in the primary's domain", obs("0-2-101", 0, time.Millisecond), primary, "0-2-101", true},
		{"a domain the primary never had", obs("0-1-100,7-2-3", 0, time.Millisecond), primary, "domain 7 up to 7-2-3", true},
		{"same sequence, another server", obs("0-2-100", 0, time.Millisecond), primary, "0-2-100 (the other has 0-1-100)", true},
		{"replica's check ended after the primary's began", obs("0-1-103", 0, 11*time.Millisecond), primary, "", false},
		{"replica checked after the primary", obs("0-1-103", 20*time.Millisecond, time.Millisecond), primary, "", false},
		{"primary did not answer", obs("0-2-101", 0, time.Millisecond), &topology.Observation{Time: t0.Add(time.Second)}, "", false},
		{"no replica check yet", nil, primary, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra, ok := ErrantOf(tc.replica, tc.primary)
			if ok != tc.ok || !strings.Contains(extra, tc.extra) || (tc.extra == "") != (extra == "") {
				t.Fatalf("ErrantOf = %q, %v; want %q, %v", extra, ok, tc.extra, tc.ok)
			}
		})
	}
}

// MaybeErrant: whatever the order of the checks, a replica ahead of its
// primary only by the primary's own transactions holds nothing errant;
// one with another server's transactions may.
func TestMaybeErrant(t *testing.T) {
	obs := func(pos string, sid uint32) *topology.Observation {
		return &topology.Observation{OK: true, ServerID: sid, GTID: topology.GTIDState{Current: topology.MustParseGTIDPos(pos)}}
	}
	primary := obs("0-1-100", 1)
	for _, tc := range []struct {
		replica string
		want    bool
	}{
		{"0-1-90", false},
		{"0-1-103", false}, // read after the primary: its own later writes
		{"0-2-101", true},
		{"0-1-100,9-2-1", true},
	} {
		if got := MaybeErrant(obs(tc.replica, 2), primary); got != tc.want {
			t.Errorf("MaybeErrant(%s) = %v, want %v", tc.replica, got, tc.want)
		}
	}
	if MaybeErrant(nil, primary) || MaybeErrant(obs("0-2-101", 2), &topology.Observation{}) {
		t.Error("MaybeErrant without both checks")
	}
}
