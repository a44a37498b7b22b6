package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// A server is "alive" from the moment spawn returns, although the kernel
// shows an empty cmdline for a moment after exec.
func TestSpawnedProcessIsAliveAtOnce(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "fake-mariadbd")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nwhile :; do :; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := Node{Name: "node1", Config: filepath.Join(dir, "my.cnf")}
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		pid, err := spawn(script, n)
		if err != nil {
			t.Fatal(err)
		}
		alive := processAlive(pid, n.Config)
		if err := killPID(ctx, pid, n.Config); err != nil {
			t.Fatal(err)
		}
		if !alive {
			t.Fatalf("spawn %d: pid %d not alive right after spawn", i, pid)
		}
		if processAlive(pid, n.Config) {
			t.Fatalf("spawn %d: pid %d alive after killPID", i, pid)
		}
	}
}
