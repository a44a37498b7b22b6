package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/agent"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/lifecycle"
)

// TestCloneFaults: clones that must fail cleanly, on one 3-node sandbox
// with agents and Vigil (issue 27). The writer is refused as a target
// (409). Each step leaves node3 routed and running on its own datadir
// for the next:
//   - Vigil's client certificate from another CA: the agents refuse the
//     handshake and audit it; the clone fails in checking and node3 is
//     never taken out of routing;
//   - node3's disk is a small tmpfs: Vigil's preflight refuses (too
//     little space for a copy of the donor's datadir), and a restore driven
//     straight at node3's agent without an expected size runs out of
//     space mid-stream: 507 no_space naming the file system, nothing
//     swapped, node3 up on its data;
//   - node3's agent requires a token: without it, or with a wrong one,
//     the agent refuses (401, audited) and the clone fails in checking;
//     with it the clone works.
func TestCloneFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	e := newCloneEnv(t)
	e.insert(0, 5000)
	e.waitCount("node3", 5000)
	m := e.sb.Manifest()
	// The steps share the sandbox and run in order; each leaves it as it
	// found it (the cloneEnv's helpers report to the step's t).
	step := func(name string, f func(t *testing.T)) {
		t.Run(name, func(st *testing.T) {
			e.t = st
			defer func() { e.t = t }()
			// node3 is routed at the start of every step (one that moved
			// it waits out its return).
			Eventually(st, 60*time.Second, "node3 ONLINE", func() error {
				if s := e.server(st, "node3"); s.State != "ONLINE" {
					return fmt.Errorf("node3 is %s (%s)", s.State, s.Reason)
				}
				return nil
			})
			f(st)
		})
	}
	// The writer is never a target, with or without a named donor
	// (TestCloneRepairsReplica names one, and refuses a second clone
	// while one runs).
	if out, err := e.ctl(t, "clone", "node1"); err == nil || !strings.Contains(out, "node1 is the writer; switch over first") || !strings.Contains(out, "HTTP 409") {
		t.Fatalf("clone of the writer: %v\n%s", err, out)
	}
	if running, finished := e.clones(); len(running)+len(finished) != 0 {
		t.Fatalf("the refused clone of the writer was started: %+v %+v", running, finished)
	}
	step("foreign client certificate", e.foreignCertificate)
	step("disk full", func(t *testing.T) { e.diskFull(t, m.Nodes[2].Datadir) })
	step("token", func(t *testing.T) { e.token(t, m.Agents[2].Config, m.Agents[2].AuditLog, m.Agents[2].PID) })
}

// reloadAgents edits Vigil's agents: section and reloads.
func (e *cloneEnv) reloadAgents(t *testing.T, edit func(*config.Agents)) {
	t.Helper()
	edit(&e.cfg.Agents)
	data, err := e.cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := e.ctl(t, "reload"); err != nil {
		t.Fatalf("reload: %v\n%s", err, out)
	}
}

// failsInChecking runs `vigil ctl clone node3 --from node2 --wait`, which
// must fail in the checking phase with an error containing every want;
// node3 must never have left routing.
func (e *cloneEnv) failsInChecking(t *testing.T, want ...string) lifecycle.Progress {
	t.Helper()
	_, before := e.clones()
	out, err := e.ctl(t, "clone", "node3", "--from", "node2", "--wait")
	if err == nil {
		t.Fatalf("the clone succeeded:\n%s", out)
	}
	_, finished := e.clones()
	if len(finished) != len(before)+1 {
		t.Fatalf("finished clones: %+v\n%s", finished, out)
	}
	p := finished[len(finished)-1]
	for _, w := range want {
		if p.Phase != lifecycle.PhaseFailed || !strings.Contains(p.Error, w) || !strings.Contains(out, w) {
			t.Errorf("clone: phase %s, error %q; want %q in it and in the output:\n%s", p.Phase, p.Error, w, out)
		}
	}
	if p.Bytes != 0 {
		t.Errorf("%d bytes streamed by a clone refused in checking", p.Bytes)
	}
	if s := e.server(t, "node3"); s.State != "ONLINE" {
		t.Errorf("node3 is %s (%s) after a clone that failed in checking, want ONLINE", s.State, s.Reason)
	}
	ev, _ := e.ctl(t, "events", "--kind", "clone_started")
	if strings.Contains(ev, "cloning node3") {
		t.Errorf("a clone started (node3 left routing):\n%s", ev)
	}
	ev, _ = e.ctl(t, "events", "--kind", "clone_failed")
	if !strings.Contains(ev, "failed before it started") || !strings.Contains(ev, "node3 is still routed as before") {
		t.Errorf("clone_failed events:\n%s", ev)
	}
	t.Logf("refused in checking: %s", p.Error)
	return p
}

func (e *cloneEnv) foreignCertificate(t *testing.T) {
	other, err := agent.Init(agent.InitOptions{Dir: filepath.Join(t.TempDir(), "other-ca")})
	if err != nil {
		t.Fatal(err)
	}
	cert, key := e.cfg.Agents.Cert, e.cfg.Agents.Key
	e.reloadAgents(t, func(a *config.Agents) { a.Cert, a.Key = other.ClientCert, other.ClientKey })
	e.failsInChecking(t, "donor node2's agent", "certificate")
	// The donor's agent refused the handshake and said so in its audit.
	audit, err := os.ReadFile(e.sb.Manifest().Agents[1].AuditLog)
	if err != nil || !strings.Contains(string(audit), `"op":"connect","outcome":"refused"`) || !strings.Contains(string(audit), "certificate") {
		t.Errorf("node2's agent audit has no refused connection: %v\n%s", err, audit)
	}
	e.reloadAgents(t, func(a *config.Agents) { a.Cert, a.Key = cert, key })
}

// onTmpfs moves node's directory (the datadir's parent: where a restore
// extracts) onto a tmpfs with free bytes left once its files are in,
// restarting the node. The test's cleanup puts it back.
func (e *cloneEnv) onTmpfs(t *testing.T, node, datadir string, free int64) {
	t.Helper()
	dir := filepath.Dir(datadir)
	if err := e.sb.Stop(e.ctx, node); err != nil {
		t.Fatal(err)
	}
	orig := dir + ".disk"
	if err := os.Rename(dir, orig); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	// Mounted large first (a tmpfs size is a limit, not an allocation),
	// then shrunk to what the files use plus free.
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4g,mode=0750", "tmpfs", dir).CombinedOutput(); err != nil {
		_ = os.Remove(dir)
		_ = os.Rename(orig, dir)
		_ = e.sb.Start(e.ctx, node)
		t.Skipf("cannot mount a tmpfs (%v: %s): the disk-full case needs root and mount", err, out)
	}
	// Back on its disk at the step's end: the files as they were when it
	// stopped (only failed restores happen meanwhile; replication catches
	// up by GTID).
	t.Cleanup(func() {
		_ = e.sb.Stop(e.ctx, node)
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s; lazily", dir, err, out)
			_ = exec.Command("umount", "-l", dir).Run()
		}
		if err := os.Remove(dir); err != nil {
			t.Error(err)
		}
		if err := os.Rename(orig, dir); err != nil {
			t.Error(err)
		}
		if err := e.sb.Start(e.ctx, node); err != nil {
			t.Errorf("start %s back on its disk: %v", node, err)
		}
	})
	if out, err := exec.Command("cp", "-a", orig+"/.", dir+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy %s onto the tmpfs: %v\n%s", node, err, out)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err != nil {
		t.Fatal(err)
	}
	used := int64(sfs.Blocks-sfs.Bfree) * int64(sfs.Bsize)
	size := (used + free + 1<<20 - 1) >> 20
	if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%dm", size), dir).CombinedOutput(); err != nil {
		t.Fatalf("shrink the tmpfs: %v\n%s", err, out)
	}
	if err := e.sb.Start(e.ctx, node); err != nil {
		t.Fatalf("start %s on the tmpfs: %v", node, err)
	}
	t.Logf("%s runs on a tmpfs of %d MiB (%d MiB used by its files)", node, size, used>>20)
}

func (e *cloneEnv) diskFull(t *testing.T, datadir string) {
	a2, err := e.sb.AgentClient("node2")
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	a3, err := e.sb.AgentClient("node3")
	if err != nil {
		t.Fatal(err)
	}
	defer a3.Close()
	// The size of a backup stream of node2, and of its datadir.
	var stream countingWriter
	if _, err := a2.Backup(e.ctx, &stream, agent.BackupOptions{}); err != nil {
		t.Fatal(err)
	}
	donor, err := a2.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Room for three quarters of the stream: less than a copy of the
	// donor's datadir (the preflight's measure: the datadir without its
	// binary and relay logs) and than the stream itself, with what node3
	// writes as it starts (about 11 MiB here) taken from it.
	if donor.CopyBytes <= 0 || donor.CopyBytes > donor.DatadirBytes || donor.StreamBytes > donor.CopyBytes {
		t.Fatalf("node2's agent: copy %d, stream %d, datadir %d bytes", donor.CopyBytes, donor.StreamBytes, donor.DatadirBytes)
	}
	free := min(stream.n, donor.CopyBytes) * 3 / 4
	t.Logf("node2's backup stream is %d MiB (estimated %d MiB), a copy of its datadir %d MiB, its datadir %d MiB",
		stream.n>>20, donor.StreamBytes>>20, donor.CopyBytes>>20, donor.DatadirBytes>>20)
	e.onTmpfs(t, "node3", datadir, free)
	Eventually(t, 60*time.Second, "node3 ONLINE on the tmpfs", func() error {
		if s := e.server(t, "node3"); s.State != "ONLINE" {
			return fmt.Errorf("node3 is %s (%s)", s.State, s.Reason)
		}
		return nil
	})
	st, err := a3.Status(e.ctx)
	if err != nil || !st.Answering || st.FreeBytes >= donor.CopyBytes {
		t.Fatalf("node3's agent: %+v %v (donor datadir %d bytes, stream %d)", st, err, donor.DatadirBytes, stream.n)
	}

	// Through Vigil: the preflight refuses, node3 stays routed.
	e.failsInChecking(t, "target node3 has too little disk space", "free beside its datadir")

	// Straight at the agent, with no expected size: the restore itself
	// runs out of space.
	_, _, err = agent.Clone(e.ctx, a2, a3, agent.BackupOptions{}, agent.RestoreOptions{})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != agent.CodeNoSpace || ae.Status != 507 ||
		!strings.Contains(ae.Message, "ran out of space") || !strings.Contains(ae.Message, filepath.Dir(datadir)) {
		t.Fatalf("restore onto a full disk: %v; want 507 no_space naming %s", err, filepath.Dir(datadir))
	}
	t.Logf("restore onto a full disk: %v", err)
	after, err := a3.Status(e.ctx)
	if err != nil || !after.Answering || len(after.Leftovers) != 0 || len(after.OldDatadirs) != len(st.OldDatadirs) || after.Busy != "" {
		t.Errorf("node3's agent after the failed restore (nothing swapped, no leftover): %+v %v", after, err)
	}
	if n, err := e.count("node3"); err != nil || n != 5000 {
		t.Errorf("node3 has %d rows (%v) after the failed restore, want its own 5000", n, err)
	}
	if s := e.server(t, "node3"); s.State != "ONLINE" {
		t.Errorf("node3 is %s after a failed restore, want ONLINE", s.State)
	}
	audit, _ := os.ReadFile(e.sb.Manifest().Agents[2].AuditLog)
	if !regexp.MustCompile(`"op":"restore".*"outcome":"failed".*"code":"no_space"`).Match(audit) {
		t.Errorf("node3's agent audit has no failed restore with code no_space:\n%s", lastLinesOf(string(audit), 5))
	}
}

// token restarts node3's agent with a bearer token required.
func (e *cloneEnv) token(t *testing.T, cfgPath, auditPath string, pid int) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("right-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("wrong-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	withToken := filepath.Join(dir, "agent3.yaml")
	if err := os.WriteFile(withToken, append(data, fmt.Sprintf("token_file: %s\n", tokenFile)...), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a3, err := e.sb.AgentClient("node3")
	if err != nil {
		t.Fatal(err)
	}
	defer a3.Close()
	Eventually(t, 10*time.Second, "node3's agent gone", func() error {
		if _, err := a3.Status(e.ctx); err == nil {
			return errors.New("still answers")
		}
		return nil
	})
	cmd := exec.Command(e.bin, "agent", "run", "--config", withToken)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	Eventually(t, 10*time.Second, "node3's agent with a token", func() error {
		_, err := a3.Status(e.ctx)
		var ae *agent.Error
		if !errors.As(err, &ae) || ae.Code != agent.CodeUnauthorized {
			return fmt.Errorf("status without a token: %v", err)
		}
		return nil
	})

	// Without a token, then with a wrong one.
	e.failsInChecking(t, "target node3's agent", "missing or wrong bearer token", "HTTP 401")
	e.reloadAgents(t, func(a *config.Agents) { a.TokenFile = wrongFile })
	e.failsInChecking(t, "target node3's agent", "missing or wrong bearer token")
	audit, _ := os.ReadFile(auditPath)
	if a := string(audit); !strings.Contains(a, `"who":"CN=vigil,O=vigil"`) || !strings.Contains(a, `"outcome":"refused"`) || !strings.Contains(a, `"code":"unauthorized"`) ||
		!strings.Contains(a, "bearer token") || strings.Contains(a, "wrong-token") || strings.Contains(a, "right-token") {
		t.Errorf("node3's agent audit: want the refusals naming the token, never showing it:\n%s", lastLinesOf(a, 5))
	}

	// With the right one the clone runs.
	e.reloadAgents(t, func(a *config.Agents) { a.TokenFile = tokenFile })
	if out, err := e.ctl(t, "clone", "node3", "--from", "node2", "--wait"); err != nil {
		t.Fatalf("clone with the right token: %v\n%s", err, out)
	}
	e.insert(5000, 5100)
	e.waitCount("node3", 5100)
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
