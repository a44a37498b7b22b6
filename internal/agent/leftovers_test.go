package agent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// At start the agent deletes the .vigil-new-* directories of its own
// interrupted restores, and nothing else.
func TestRemoveInterrupted(t *testing.T) {
	base := t.TempDir()
	datadir := filepath.Join(base, "data")
	mk := func(name string) string {
		t.Helper()
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "ibdata1"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("data")
	partial := mk("data.vigil-new-20261127T210028.256Z")
	partial2 := mk("data.vigil-new-20261128T000102.003Z")
	keep := []string{
		mk("data.vigil-old-20261127T210028.256Z"),    // the previous datadir
		mk("data.vigil-failed-20261127T210028.256Z"), // kept for a look
		mk("data.vigil-new-by-hand"),                 // not a name a restore makes
		mk("data2.vigil-new-20261127T210028.256Z"),   // another datadir's
		mk("other/data.vigil-new-20261127T210028.256Z"),
	}
	// A file with the pattern's name is not a restore's directory.
	file := filepath.Join(base, "data.vigil-new-20261127T210029.000Z")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, file)
	s := &Server{cfg: &Config{Datadir: datadir + "/"}}

	removed, err := s.removeInterrupted()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{partial, partial2}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, p := range append(keep, datadir) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}

	// Killed between the two renames of a swap: no datadir, the prepared
	// copy at .vigil-new-*: everything stays for an operator.
	partial = mk("data.vigil-new-20261128T000103.000Z")
	if err := os.Rename(datadir, datadir+".vigil-old-20261128T000103.000Z"); err != nil {
		t.Fatal(err)
	}
	if removed, err := s.removeInterrupted(); err == nil || len(removed) != 0 {
		t.Errorf("without a datadir: removed %v, err %v", removed, err)
	}
	if _, err := os.Stat(partial); err != nil {
		t.Errorf("the prepared copy of a half-done swap was deleted: %v", err)
	}
}

// The room a restored copy needs leaves out the binary and relay logs and
// the temporary tablespace; the stream leaves out the redo log too; files
// in schema directories are always counted, whatever their names.
func TestDatadirSizes(t *testing.T) {
	dir := t.TempDir()
	files := map[string]int{
		"ibdata1": 100, "ib_logfile0": 1000, "ibtmp1": 50, "aria_log.00000001": 7, "aria_log_control": 1,
		"mysql-bin.000001": 400, "mysql-bin.000002": 300, "mysql-bin.index": 20,
		"host-relay-bin.000003": 200, "host-relay-bin.index": 20, "mysql.pid": 5,
		"db/t.ibd": 60, "db/t.frm": 2, "db/odd.000001": 3,
	}
	for name, n := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := datadirSizes(dir)
	want := datadirSize{all: 2168, copy: 1000 + 100 + 7 + 1 + 5 + 60 + 2 + 3, stream: 100 + 7 + 1 + 5 + 60 + 2 + 3}
	if got != want {
		t.Fatalf("datadirSizes = %+v, want %+v", got, want)
	}
}
