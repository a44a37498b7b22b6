// Package e2e holds Vigil's end-to-end tests and the helpers they share:
// sandboxes of real mariadbd processes that are always torn down (after a
// failure, on SIGINT/SIGTERM, and by a reaper process if the test binary
// dies), the vigil binary built once per test binary, and bounded polling.
//
// A test binary of this package must call Main from its TestMain (one
// TestMain per package: it lives in sandbox_test.go).
package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/sandbox"
)

// reaperEnv, when set, makes the test binary a reaper for the sandboxes
// under the directory it names.
const reaperEnv = "VIGIL_E2E_REAPER"

// harness is the state of one test binary: where its sandboxes live and
// which are up. It is package state because signal handling and TestMain
// have no other place to find it.
var harness struct {
	once    sync.Once
	base    string
	baseErr error

	mu   sync.Mutex
	dirs map[string]bool

	buildOnce sync.Once
	vigilBin  string
	buildErr  error

	benchOnce     sync.Once
	benchBin      string
	benchBuildErr error
}

// Main runs the tests of the package. It tears down every sandbox when
// the binary gets SIGINT or SIGTERM and starts a reaper process that does
// the same if the binary dies without cleaning up (a -timeout panic).
func Main(m *testing.M) {
	if base := os.Getenv(reaperEnv); base != "" {
		reap(base)
		return
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every e2e test skips itself
	}
	base, err := baseDir()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	stopReaper := startReaper(base)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "e2e: %v: tearing down sandboxes\n", sig)
		teardownAll()
		_ = os.RemoveAll(base)
		os.Exit(2)
	}()
	code := m.Run()
	signal.Stop(sigs)
	teardownAll()
	_ = os.RemoveAll(base)
	stopReaper()
	os.Exit(code)
}

// baseDir is the directory of this binary's sandboxes: short (unix socket
// paths are limited to 107 bytes) and traversable by the mysql user.
func baseDir() (string, error) {
	harness.once.Do(func() {
		d, err := os.MkdirTemp("/tmp", "vigil-e2e-")
		if err == nil {
			err = os.Chmod(d, 0o755)
		}
		harness.base, harness.baseErr = d, err
	})
	return harness.base, harness.baseErr
}

// startReaper starts a copy of the test binary in its own session that
// waits for this process to go away (its stdin closes) and then tears
// down whatever sandboxes remain under base.
func startReaper(base string) (stop func()) {
	r, w, err := os.Pipe()
	if err != nil {
		return func() {}
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), reaperEnv+"="+base)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return func() {}
	}
	_ = r.Close()
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return func() {
		_ = w.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}
}

// reap waits for EOF on stdin, then downs every sandbox under base.
func reap(base string) {
	_, _ = io.Copy(io.Discard, os.Stdin)
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		if e.IsDir() {
			_ = downDir(filepath.Join(base, e.Name()))
		}
	}
	_ = os.RemoveAll(base)
}

func register(dir string) {
	harness.mu.Lock()
	defer harness.mu.Unlock()
	if harness.dirs == nil {
		harness.dirs = map[string]bool{}
	}
	harness.dirs[dir] = true
}

func unregister(dir string) {
	harness.mu.Lock()
	defer harness.mu.Unlock()
	delete(harness.dirs, dir)
}

func teardownAll() {
	harness.mu.Lock()
	dirs := make([]string, 0, len(harness.dirs))
	for d := range harness.dirs {
		dirs = append(dirs, d)
	}
	harness.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range dirs {
		wg.Add(1)
		go func() { defer wg.Done(); downDir(d) }()
	}
	wg.Wait()
}

// downDir stops and deletes the sandbox in dir, if there is one, and the
// directory.
func downDir(dir string) error {
	defer os.RemoveAll(dir)
	sb, err := sandbox.Load(dir)
	if errors.Is(err, sandbox.ErrNoSandbox) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return sb.Down(ctx, true)
}

// RequireMariaDB skips the test in -short mode and fails it when the
// MariaDB server is not installed.
func RequireMariaDB(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: skipped in -short mode")
	}
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if !haveProgram(bin) {
			t.Fatalf("e2e: %s not found: install the test dependencies with `sudo scripts/install-deps.sh` (or run go test -short to skip e2e tests)", bin)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("e2e: sandboxes need root (the servers run as user mysql; isolate uses iptables)")
	}
}

func haveProgram(name string) bool {
	if _, err := exec.LookPath(name); err == nil {
		return true
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/usr/local/sbin", "/usr/local/bin"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// SandboxDir returns a fresh directory for a sandbox (created by the Go API
// or by `vigil sandbox up --dir`). Cleanup always tears down the sandbox
// in it and deletes it; when the test failed it first copies the nodes'
// logs to test-artifacts/<TestName>/ at the repository root.
func SandboxDir(t testing.TB) string {
	t.Helper()
	base, err := baseDir()
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	name := unsafeName.ReplaceAllString(t.Name(), "_")
	if len(name) > 24 {
		name = name[:24]
	}
	dir, err := os.MkdirTemp(base, name+"-")
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	register(dir)
	t.Cleanup(func() {
		if t.Failed() {
			saveArtifacts(t, dir)
		}
		if err := downDir(dir); err != nil {
			t.Errorf("e2e: tearing down the sandbox in %s: %v", dir, err)
		}
		unregister(dir)
	})
	return dir
}

// Sandbox creates a sandbox with free ports in a fresh directory (unless
// opts.Dir is set) and tears it down when the test ends.
func Sandbox(t testing.TB, opts sandbox.Options) *sandbox.Sandbox {
	t.Helper()
	RequireMariaDB(t)
	if opts.Dir == "" {
		opts.Dir = SandboxDir(t)
	} else {
		register(opts.Dir)
		t.Cleanup(func() {
			if t.Failed() {
				saveArtifacts(t, opts.Dir)
			}
			if err := downDir(opts.Dir); err != nil {
				t.Errorf("e2e: tearing down the sandbox in %s: %v", opts.Dir, err)
			}
			unregister(opts.Dir)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	sb, err := sandbox.Up(ctx, opts)
	if err != nil {
		t.Fatalf("e2e: sandbox up: %v", err)
	}
	t.Logf("e2e: %s sandbox with %d nodes up in %s in %s", sb.Topology(), len(sb.Nodes()), time.Since(t0).Round(time.Millisecond), sb.Dir())
	return sb
}

// saveArtifacts copies the logs of a sandbox to test-artifacts/<test>/ and
// logs the tail of each error log.
func saveArtifacts(t testing.TB, dir string) {
	sb, err := sandbox.Load(dir)
	if err != nil {
		return
	}
	root, err := RepoRoot()
	if err != nil {
		return
	}
	dest := filepath.Join(root, "test-artifacts", unsafeName.ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dest, 0o755); err != nil {
		t.Logf("e2e: artifacts: %v", err)
		return
	}
	_ = copyFile(sb.ManifestPath(), filepath.Join(dest, "sandbox.json"))
	for _, n := range append(sb.Nodes(), sb.Spares()...) {
		_ = copyFile(n.ErrorLog, filepath.Join(dest, n.Name+"-error.log"))
		_ = copyFile(filepath.Join(filepath.Dir(n.Config), "mariadbd.out"), filepath.Join(dest, n.Name+"-mariadbd.out"))
		t.Logf("e2e: last lines of %s's error log (all of it in %s):\n%s", n.Name, dest, tailLines(n.ErrorLog, 15))
	}
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

func tailLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RepoRoot is the directory of go.mod above the working directory.
func RepoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no go.mod above the working directory")
		}
		d = parent
	}
}

// BuildVigil builds ./cmd/vigil once per test binary and returns the path
// of the binary.
func BuildVigil(t testing.TB) string {
	t.Helper()
	harness.buildOnce.Do(func() {
		harness.vigilBin, harness.buildErr = buildVigil()
	})
	if harness.buildErr != nil {
		t.Fatalf("e2e: build vigil: %v", harness.buildErr)
	}
	return harness.vigilBin
}

func buildVigil() (string, error) {
	// VIGIL_E2E_BIN runs the tests against a binary built elsewhere: the
	// benchmarks compare an older build with this one, interleaved.
	if bin := os.Getenv("VIGIL_E2E_BIN"); bin != "" {
		return bin, nil
	}
	return goBuild("vigil")
}

// BuildVigilBench builds ./cmd/vigil-bench once per test binary and
// returns the path of the binary.
func BuildVigilBench(t testing.TB) string {
	t.Helper()
	harness.benchOnce.Do(func() {
		harness.benchBin, harness.benchBuildErr = goBuild("vigil-bench")
	})
	if harness.benchBuildErr != nil {
		t.Fatalf("e2e: build vigil-bench: %v", harness.benchBuildErr)
	}
	return harness.benchBin
}

// goBuild builds ./cmd/NAME into the base directory.
func goBuild(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	base, err := baseDir()
	if err != nil {
		return "", err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	out := filepath.Join(base, name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "./cmd/"+name)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %v\n%s", name, err, msg)
	}
	return out, nil
}

// Result is what a run of the vigil binary did.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
	Took           time.Duration
}

// RunVigil runs the vigil binary with args, bounded by two minutes, and
// returns what it did; err is only for failures to run it at all.
func RunVigil(t testing.TB, args ...string) (Result, error) {
	t.Helper()
	return runProgram(BuildVigil(t), withAdminToken(args))
}

// RunVigilBench runs vigil-bench with args, measuring the vigil binary
// of the tests (BuildVigil), like RunVigil.
func RunVigilBench(t testing.TB, args ...string) (Result, error) {
	t.Helper()
	bench := BuildVigilBench(t)
	return runProgram(bench, slices.Concat(args, []string{"--vigil-binary", BuildVigil(t)}))
}

func runProgram(bin string, args []string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(t0)}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.ExitCode = exit.ExitCode()
		err = nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("%s %s: timed out after 2m", filepath.Base(bin), strings.Join(args, " "))
	}
	return r, err
}

// Vigil runs the vigil binary and fails the test unless it exits 0;
// it returns standard output.
func Vigil(t testing.TB, args ...string) string {
	t.Helper()
	r, err := RunVigil(t, args...)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	if r.ExitCode != 0 {
		t.Fatalf("e2e: vigil %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.ExitCode, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Eventually calls f until it returns nil, failing the test with f's last
// error if that does not happen within timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("e2e: %s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ServerPIDs lists the live mariadbd processes whose command line names a
// file under dir (zombies excluded), to check that a sandbox is gone.
func ServerPIDs(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if !ProcessAlive(pid) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("mariadbd")) {
			continue
		}
		if bytes.Contains(cmdline, []byte("--defaults-file="+dir+"/")) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}

// ProcessAlive reports whether pid is a live process: one of its threads
// is not a zombie (a killed process whose leader is a zombie still holds
// its sockets until its last thread is gone).
func ProcessAlive(pid int) bool {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return false
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X' {
			return true
		}
	}
	return false
}

// withAdminToken adds --token to a `vigil ctl --admin ADDR` command line
// that has no credentials, when the test started that Vigil.
func withAdminToken(args []string) []string {
	if len(args) < 3 || args[0] != "ctl" {
		return args
	}
	addr := ""
	for i, a := range args {
		switch {
		case a == "--token" || a == "--user" || a == "--token-file" || a == "--sandbox":
			return args
		case a == "--admin" && i+1 < len(args):
			addr = strings.TrimPrefix(strings.TrimPrefix(args[i+1], "http://"), "https://")
		}
	}
	if tok := adminToken(addr); tok != "" {
		return append([]string{"ctl", "--token", tok}, args[1:]...)
	}
	return args
}

// Within reports whether f succeeds before timeout (polling like
// Eventually), for a condition the test handles itself when it does not.
func Within(timeout time.Duration, f func() error) bool {
	deadline := time.Now().Add(timeout)
	for {
		if f() == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
