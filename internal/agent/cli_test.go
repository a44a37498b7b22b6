package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vigil agent init, run and status, as an operator types them.
func TestCommandInitRunStatus(t *testing.T) {
	dir := t.TempDir()
	certs := filepath.Join(dir, "certs")
	var out, errOut bytes.Buffer
	if code := Command(context.Background(), []string{"init", "--dir", certs, "--hosts", "127.0.0.1"}, &out, &errOut); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "vigil.crt") {
		t.Errorf("init output: %s", out.String())
	}
	if code := Command(context.Background(), []string{"init", "--dir", certs}, &out, &errOut); code == 0 {
		t.Errorf("second init into the same dir succeeded")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	datadir := filepath.Join(dir, "data")
	if err := os.Mkdir(datadir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A restore of an earlier run of this agent was interrupted: run
	// deletes its directory before it serves.
	interrupted := datadir + ".vigil-new-20261127T210028.256Z"
	if err := os.Mkdir(interrupted, 0o700); err != nil {
		t.Fatal(err)
	}
	audit := filepath.Join(dir, "audit.log")
	cfg := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `listen: %s
tls: {ca: %s/ca.crt, cert: %s/agent.crt, key: %s/agent.key}
audit_log: %s
datadir: %s
server: {socket: %s/none.sock}
`, addr, certs, certs, certs, audit, datadir, dir), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var runErr bytes.Buffer
	go func() { done <- Command(ctx, []string{"run", "--config", cfg}, &bytes.Buffer{}, &runErr) }()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("run: exit %d", code)
		}
	}()
	var st Status
	deadline := time.Now().Add(5 * time.Second)
	for {
		out.Reset()
		errOut.Reset()
		if Command(context.Background(), []string{"status", "--addr", addr, "--certs", certs}, &out, &errOut) == 0 {
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatalf("status output: %v\n%s", err, out.String())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never answered: %s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st.Datadir != datadir || st.Running {
		t.Errorf("status: %+v", st)
	}
	fi, err := os.Stat(audit)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit log: %v %v", fi, err)
	}
	data, _ := os.ReadFile(audit)
	if !strings.Contains(string(data), `"op":"status"`) || !strings.Contains(string(data), `"op":"remove_interrupted"`) {
		t.Errorf("audit log:\n%s", data)
	}
	if _, err := os.Stat(interrupted); !os.IsNotExist(err) || len(st.Leftovers) != 0 {
		t.Errorf("the interrupted restore's directory is still there (%v), leftovers %v", err, st.Leftovers)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("listen: x\nsurprise: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	errOut.Reset()
	if code := Command(context.Background(), []string{"run", "--config", bad}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), "surprise") {
		t.Errorf("bad config: exit %d: %s", code, errOut.String())
	}
}
