package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// installHint says how to get the server binaries.
const installHint = "install MariaDB with: sudo scripts/install-deps.sh (or: apt-get install mariadb-server mariadb-client galera-4)"

// binaries are the programs a sandbox runs.
type binaries struct {
	mariadbd  string
	installDB string
}

// lookPath finds a program in PATH or the usual sbin/bin directories,
// which a non-login root shell may not have in PATH.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/local/mysql/bin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

// findBinaries checks for everything a topology needs.
func findBinaries(t Topology) (binaries, error) {
	var b binaries
	var err error
	if b.mariadbd, err = lookPath("mariadbd"); err != nil {
		return b, fmt.Errorf("mariadbd not found: %s", installHint)
	}
	if b.installDB, err = lookPath("mariadb-install-db"); err != nil {
		return b, fmt.Errorf("mariadb-install-db not found: %s", installHint)
	}
	if t == Galera {
		if _, err := os.Stat(GaleraProvider); err != nil {
			return b, fmt.Errorf("galera provider %s not found: %s", GaleraProvider, installHint)
		}
		if _, err := lookPath("rsync"); err != nil {
			return b, errors.New("rsync not found (Galera uses it for state transfers): sudo scripts/install-deps.sh (or: apt-get install rsync)")
		}
	}
	return b, nil
}

// serverEnv is the environment of mariadbd and its SST scripts: ours
// without MySQL/MariaDB variables that would change what they read, and a
// PATH that has the sbin directories the SST scripts need.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "MYSQL") || strings.HasPrefix(k, "MARIADB") || k == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
}

// spawn starts mariadbd for a node in its own session (and cgroup when the
// node has one) and returns its pid without waiting for it. A goroutine
// reaps it if it exits while this process lives; otherwise init does.
func spawn(mariadbd string, n Node, extra ...string) (int, error) {
	return spawnProc(procSpec{
		name:   n.Name,
		bin:    mariadbd,
		args:   append([]string{"--defaults-file=" + n.Config, "--user=mysql"}, extra...),
		dir:    n.dir(),
		env:    serverEnv(),
		out:    filepath.Join(n.dir(), "mariadbd.out"),
		cgroup: n.Cgroup,
	})
}

// procSpec is a process the sandbox starts: a server, an etcd member or a
// Vigil daemon.
type procSpec struct {
	name   string   // for messages
	bin    string   // program
	args   []string // its arguments
	dir    string   // working directory
	env    []string // environment
	out    string   // stdout and stderr are appended to this file
	cgroup string   // cgroup v2 path relative to the root, or ""
}

// spawnProc starts p in its own session (and cgroup when it names one) and
// returns its pid without waiting for it. A goroutine reaps it if it exits
// while this process lives; otherwise init does.
func spawnProc(p procSpec) (int, error) {
	out, err := os.OpenFile(p.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", p.name, err)
	}
	defer out.Close()
	mk := func() *exec.Cmd {
		cmd := exec.Command(p.bin, p.args...)
		cmd.Dir = p.dir
		cmd.Env = p.env
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		return cmd
	}
	cmd := mk()
	var cgFD *os.File
	if p.cgroup != "" {
		if abs, err := ensureCgroup(p.cgroup); err == nil {
			if f, err := os.Open(abs); err == nil {
				cgFD = f
				defer f.Close()
				cmd.SysProcAttr.UseCgroupFD = true
				cmd.SysProcAttr.CgroupFD = int(f.Fd())
			}
		}
	}
	if err := cmd.Start(); err != nil {
		if cgFD == nil {
			return 0, fmt.Errorf("start %s: %w", p.name, err)
		}
		// clone3 into a cgroup can fail on older kernels: start normally
		// and move the process before it opens any socket.
		cmd = mk()
		if err := cmd.Start(); err != nil {
			return 0, fmt.Errorf("start %s: %w", p.name, err)
		}
		_ = moveToCgroup(p.cgroup, cmd.Process.Pid)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

// procID tells the processes of one sandbox member apart from every other
// process by one option of its command line: "flag=value" as one argument
// or flag and value as two. The zero procID matches any process.
type procID struct{ flag, value string }

// nodeProc identifies the mariadbd of a node by its --defaults-file; ""
// matches any process.
func nodeProc(config string) procID {
	if config == "" {
		return procID{}
	}
	return procID{flag: "--defaults-file", value: config}
}

func (p procID) match(cmdline []byte) bool {
	args := bytes.Split(cmdline, []byte{0})
	for i, a := range args {
		if string(a) == p.flag+"="+p.value || (string(a) == p.flag && i+1 < len(args) && string(args[i+1]) == p.value) {
			return true
		}
	}
	return false
}

// processAlive reports whether pid is a live (not zombie) mariadbd started
// with config, so a recycled pid is never mistaken for a node.
func processAlive(pid int, config string) bool { return alive(pid, nodeProc(config), true) }

// procAlive reports whether pid is a live (not zombie) process that id
// matches.
func procAlive(pid int, id procID) bool { return alive(pid, id, true) }

// alive is procAlive; execGrace waits a moment for the arguments of a
// process that has just exec'd (scans of every pid pass false: kernel
// threads have no arguments at all).
func alive(pid int, id procID, execGrace bool) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	if st := statState(stat); st == 'Z' || st == 'X' {
		// A zombie leader has an empty cmdline; a thread still running
		// shows the process's.
		tid, ok := liveThread(pid)
		if !ok {
			return false
		}
		proc = fmt.Sprintf("/proc/%d/task/%d", pid, tid)
	}
	if id.flag == "" {
		return true
	}
	// Right after exec (cmd.Start returns once the old image is gone) the
	// new image's arguments may not be in place yet: cmdline reads empty
	// for a moment.
	for try := 0; ; try++ {
		cmdline, err := os.ReadFile(proc + "/cmdline")
		if err != nil {
			return false
		}
		if len(cmdline) > 0 || !execGrace || try == 100 {
			return id.match(cmdline)
		}
		time.Sleep(time.Millisecond)
	}
}

func statState(stat []byte) byte {
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2]
	}
	return 0
}

// liveThread finds a thread of pid that is not dead yet. After SIGKILL
// the thread group leader turns zombie before the other threads have
// exited, and until the last one has, the process still holds its files
// and sockets (its port still accepts connections).
func liveThread(pid int) (int, bool) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, false
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue
		}
		if st := statState(stat); st != 'Z' && st != 'X' {
			tid, err := strconv.Atoi(t.Name())
			return tid, err == nil
		}
	}
	return 0, false
}

// processState is the one-letter state of /proc/PID/stat ("T" when
// stopped), or "".
func processState(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return string(stat[i+2])
	}
	return ""
}

// serverPIDs finds live mariadbd processes started with config, recorded
// or not (a crashed `up` may not have recorded one).
func serverPIDs(config string) []int { return procPIDs(nodeProc(config)) }

// procPIDs finds the live processes that id matches.
func procPIDs(id procID) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if alive(pid, id, false) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitGone waits until pid is no longer a live process that id matches,
// at most d.
func waitGone(ctx context.Context, pid int, id procID, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for procAlive(pid, id) {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return !procAlive(pid, id)
		case <-time.After(25 * time.Millisecond):
		}
	}
	return true
}

// stopPID shuts a server down cleanly (SIGTERM, after SIGCONT in case it is
// paused), and kills it if it is still there after grace.
func stopPID(ctx context.Context, pid int, config string, grace time.Duration) error {
	return stopProc(ctx, pid, nodeProc(config), grace)
}

// stopProc is stopPID for any process that id matches.
func stopProc(ctx context.Context, pid int, id procID, grace time.Duration) error {
	if !procAlive(pid, id) {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM %d: %w", pid, err)
	}
	if waitGone(ctx, pid, id, grace) {
		return nil
	}
	return killProc(context.WithoutCancel(ctx), pid, id)
}

// killPID sends SIGKILL and waits until the process is gone.
func killPID(ctx context.Context, pid int, config string) error {
	return killProc(ctx, pid, nodeProc(config))
}

// killProc is killPID for any process that id matches.
func killProc(ctx context.Context, pid int, id procID) error {
	if !procAlive(pid, id) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL %d: %w", pid, err)
	}
	if !waitGone(ctx, pid, id, 15*time.Second) {
		return fmt.Errorf("pid %d is still there 15s after SIGKILL", pid)
	}
	return nil
}

// Cgroups: each node runs in its own cgroup v2 group so `isolate` can drop
// every packet the node sends (iptables -m cgroup), including those of
// connections it opened itself, which port rules cannot see.

// cgroup2Root is the mount point of the cgroup v2 hierarchy, or "".
func cgroup2Root() string {
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "cgroup2" {
			return f[1]
		}
	}
	return ""
}

// sandboxCgroup is the cgroup (relative to the cgroup2 root) of a sandbox
// directory; node cgroups are below it.
func sandboxCgroup(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return "vigil-sandbox/" + hex.EncodeToString(sum[:6])
}

// ensureCgroup creates a cgroup and returns its absolute path.
func ensureCgroup(rel string) (string, error) {
	root := cgroup2Root()
	if root == "" {
		return "", errors.New("no cgroup2 mount")
	}
	abs := filepath.Join(root, rel)
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", err
	}
	return abs, nil
}

func moveToCgroup(rel string, pid int) error {
	abs, err := ensureCgroup(rel)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(abs, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

// cgroupPIDs are the processes left in a node's cgroup (SST helpers).
func cgroupPIDs(rel string) []int {
	root := cgroup2Root()
	if root == "" || rel == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(root, rel, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// removeCgroups removes the node cgroups of a sandbox and its own; a
// cgroup that still has processes stays.
func removeCgroups(dir string, nodes []Node) {
	root := cgroup2Root()
	if root == "" {
		return
	}
	for _, n := range nodes {
		if n.Cgroup != "" {
			_ = os.Remove(filepath.Join(root, n.Cgroup))
		}
	}
	_ = os.Remove(filepath.Join(root, sandboxCgroup(dir)))
	_ = os.Remove(filepath.Join(root, "vigil-sandbox")) // fails while other sandboxes use it
}

// canUseCgroups reports whether node cgroups can be created here.
func canUseCgroups(dir string) bool {
	abs, err := ensureCgroup(sandboxCgroup(dir))
	if err != nil {
		return false
	}
	_, err = os.Stat(filepath.Join(abs, "cgroup.procs"))
	return err == nil
}
