package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The Vigil measured is the program named, made absolute, and the report
// carries its own version line, not the bench's.
func TestVigilBinary(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "vigil")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'vigil v9.9 (commit abc123)'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	bin, err := vigilBinary("./vigil")
	if err != nil || bin != fake {
		t.Fatalf("vigilBinary(./vigil) = %q, %v; want %q", bin, err, fake)
	}
	if v := vigilVersion(context.Background(), bin); v != "v9.9 (commit abc123)" {
		t.Errorf("vigilVersion = %q", v)
	}

	plain := filepath.Join(dir, "notes")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := vigilBinary(plain); err == nil || !strings.Contains(err.Error(), "not an executable") {
		t.Errorf("vigilBinary(a plain file): %v", err)
	}
	if _, err := vigilBinary(filepath.Join(dir, "missing")); err == nil {
		t.Error("vigilBinary(a missing file): no error")
	}
}

// Without --vigil-binary and with no vigil beside the test binary, the
// one on PATH is taken.
func TestVigilBinaryFromPath(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(exe), "vigil")); err == nil {
		t.Skip("a vigil lies beside the test binary")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "vigil")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if bin, err := vigilBinary(""); err != nil || bin != fake {
		t.Errorf("vigilBinary(\"\") = %q, %v; want %q", bin, err, fake)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := vigilBinary(""); err == nil || !strings.Contains(err.Error(), "--vigil-binary") {
		t.Errorf("vigilBinary(\"\") with no vigil anywhere: %v", err)
	}
}
