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
