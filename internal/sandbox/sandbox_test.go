package sandbox

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := testManifest(t, Replication, 3, true)
	m.Dir = dir
	if err := writeManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Manifest()
	if !reflect.DeepEqual(&got, m) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, m)
	}
	if _, err := s.Node("node9"); err == nil || !strings.Contains(err.Error(), "node1, node2, node3") {
		t.Errorf("unknown node error = %v, want the valid names", err)
	}
	if s.Addr("node2") != "127.0.0.1:23307" {
		t.Errorf("Addr(node2) = %q", s.Addr("node2"))
	}
	if got := s.DSN("node2", "app", "app", "sbtest"); got != "app:app@tcp(127.0.0.1:23307)/sbtest" {
		t.Errorf("DSN = %q", got)
	}
	if got := s.SocketDSN("node1", ""); !strings.Contains(got, "root@unix(") || !strings.Contains(got, "mysqld.sock") {
		t.Errorf("SocketDSN = %q", got)
	}

	// update sees and keeps changes made by another handle.
	other, _ := Load(dir)
	ctx := context.Background()
	if err := other.setPaused(ctx, "node2", true); err != nil {
		t.Fatal(err)
	}
	if err := s.setIsolated(ctx, "node3", true); err != nil {
		t.Fatal(err)
	}
	again, _ := Load(dir)
	if n, _ := again.Node("node2"); !n.Paused {
		t.Error("paused flag lost")
	}
	if n, _ := again.Node("node3"); !n.Isolated {
		t.Error("isolated flag lost")
	}
}

func TestLoadMissing(t *testing.T) {
	_, err := Load(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "vigil sandbox up --dir") {
		t.Errorf("Load of an empty dir = %v", err)
	}
}

func TestLockDirExclusive(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	unlock, err := lockDir(ctx, dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(ctx, dir, 100*time.Millisecond); err == nil || !strings.Contains(err.Error(), "another vigil sandbox command") {
		t.Errorf("second lock = %v", err)
	}
	unlock()
	unlock2, err := lockDir(ctx, dir, time.Second)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestMakeTraversable(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := makeTraversable(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{base, filepath.Join(base, "a")} {
		st, _ := os.Stat(d)
		if st.Mode().Perm()&0o001 == 0 {
			t.Errorf("%s is %v, not traversable by others", d, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o755 {
		t.Errorf("sandbox dir is %v, want 0755", st.Mode().Perm())
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{}, "--dir"},
		{Options{Dir: "/x", Topology: "ring"}, "unknown topology"},
		{Options{Dir: "/x", Nodes: -1}, "--nodes"},
		{Options{Dir: "/x", Topology: Galera, SemiSync: true}, "--semi-sync"},
		{Options{Dir: "/x", Nodes: 1, SemiSync: true}, "at least 2"},
	} {
		err := c.o.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("validate(%+v) = %v, want %q", c.o, err, c.want)
		}
	}
	if o := (Options{Dir: "/x", Topology: Standalone}).withDefaults(); o.Nodes != 1 {
		t.Errorf("standalone default nodes = %d", o.Nodes)
	}
	if o := (Options{Dir: "/x"}).withDefaults(); o.Nodes != 3 || o.Topology != Replication {
		t.Errorf("defaults = %+v", o)
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  []string
		dir  string
		json bool
	}{
		{[]string{"node1", "--dir", "/tmp/sb"}, []string{"node1"}, "/tmp/sb", false},
		{[]string{"--dir", "/tmp/sb", "node1"}, []string{"node1"}, "/tmp/sb", false},
		{[]string{"-dir=/tmp/sb", "node1", "--json"}, []string{"node1"}, "/tmp/sb", true},
		{[]string{"node1", "SELECT 1", "--dir", "/d"}, []string{"node1", "SELECT 1"}, "/d", false},
		{[]string{"--dir", "/d", "node1", "--", "-- a comment"}, []string{"node1", "-- a comment"}, "/d", false},
		{nil, nil, "", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		dir := fs.String("dir", "", "")
		js := fs.Bool("json", false, "")
		pos, err := ParseInterleaved(fs, c.args)
		if err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if !reflect.DeepEqual(pos, c.pos) || *dir != c.dir || *js != c.json {
			t.Errorf("%q: pos %q dir %q json %v; want %q %q %v", c.args, pos, *dir, *js, c.pos, c.dir, c.json)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	if _, err := ParseInterleaved(fs, []string{"node1", "--bogus"}); err == nil {
		t.Error("unknown flag after a positional argument was accepted")
	}
}

func TestLogSummary(t *testing.T) {
	p := filepath.Join(t.TempDir(), "error.log")
	log := "2026 [Note] starting\n2026 [ERROR] Can't start server: Bind on TCP/IP port: Address already in use\n2026 [ERROR] Aborting\n"
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := logSummary(p)
	if !strings.Contains(got, "Address already in use") || !strings.Contains(got, "Aborting") || strings.Contains(got, "\n") {
		t.Errorf("logSummary = %q", got)
	}
	if got := logSummary(filepath.Join(t.TempDir(), "none")); !strings.Contains(got, "no log") {
		t.Errorf("missing log: %q", got)
	}
}

func TestMarkSafeToBootstrap(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "grastate.dat")
	if err := os.WriteFile(p, []byte("# GALERA saved state\nversion: 2.1\nuuid:    x\nseqno:   -1\nsafe_to_bootstrap: 0\n"), 0o660); err != nil {
		t.Fatal(err)
	}
	if err := markSafeToBootstrap(dir); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(p)
	if !strings.Contains(string(data), "safe_to_bootstrap: 1\n") || !strings.Contains(string(data), "seqno:   -1") {
		t.Errorf("grastate.dat = %q", data)
	}
	if err := markSafeToBootstrap(t.TempDir()); err != nil {
		t.Errorf("no grastate.dat: %v", err)
	}
}

func TestProcessAliveChecksConfig(t *testing.T) {
	if !processAlive(os.Getpid(), "") {
		t.Error("own process not alive")
	}
	if processAlive(os.Getpid(), "/nonexistent/my.cnf") {
		t.Error("own process taken for a server of another config")
	}
	if processAlive(0, "") || processAlive(-1, "") {
		t.Error("pid <= 0 alive")
	}
}
