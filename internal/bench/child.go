package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is a long-running helper process (Vigil, HAProxy) in its own
// session (see ownSession), so a Ctrl-C on the terminal reaches only
// vigil-bench, which stops its children itself, in order.
type child struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // set before done is closed
}

// startChild starts bin with args, its output appended to logPath.
func startChild(name, logPath, bin string, args ...string) (*child, error) {
	return startChildEnv(name, logPath, nil, bin, args...)
}

// startChildEnv is startChild with the environment env (nil: ours).
func startChildEnv(name, logPath string, env []string, bin string, args ...string) (*child, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	// Pdeathsig: should vigil-bench itself be killed, the child goes too.
	cmd.SysProcAttr = ownSession()
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		f.Close()
		close(c.done)
	}()
	return c, nil
}

// PID of the child.
func (c *child) PID() int { return c.cmd.Process.Pid }

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child's process group and waits; SIGKILL after
// timeout.
func (c *child) stop(timeout time.Duration) error {
	if c.exited() {
		return nil
	}
	pgid := c.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(timeout):
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	select {
	case <-c.done:
		return fmt.Errorf("%s did not stop within %s after SIGTERM: killed", c.name, timeout)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("%s (pid %d) did not die after SIGKILL", c.name, pgid)
	}
}

// waitListening waits until addr accepts TCP connections, the child dies,
// ctx ends or timeout passes.
func (c *child) waitListening(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if c.exited() {
			return fmt.Errorf("%s exited at start (%v); its log %s ends with:\n%s", c.name, c.err, c.log, tailFile(c.log, 15))
		}
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within %s; its log %s ends with:\n%s", c.name, addr, timeout, c.log, tailFile(c.log, 15))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tailFile is the last n lines of a file, for error messages.
func tailFile(path string, n int) string {
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

// freeLoopbackAddr asks the kernel for a free port on 127.0.0.1.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// listening reports whether something accepts connections on addr.
func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

// raiseOpenFileLimit sets the soft RLIMIT_NOFILE to the hard limit. It
// calls Setrlimit even when Go already raised the soft limit at start-up:
// Go restores the original limit in children unless the program sets it
// itself, and HAProxy needs about two descriptors per connection.
func raiseOpenFileLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, err
	}
	r.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return r.Cur, err
	}
	return r.Cur, nil
}

// ownSession starts a process in a session of its own, and so in a process
// group of its own: killing -PID reaches it and what it started. A new
// session is also a scheduling group of its own where the kernel groups
// processes by session (sched_autogroup_enabled, on by default in Debian):
// the CPU is shared fairly between sessions first, then between the threads
// of each. Vigil, HAProxy and sysbench each get one, as the sandbox's
// servers do, as services do under systemd (a cgroup each). In
// vigil-bench's own session, a proxy's two threads shared one session's
// share with sysbench's 32 client threads: the proxy waited behind its
// own load generator, and the read-only mix at 32 threads read a p95 of
// 60-70 ms through Vigil where a proxy of its own session read 41 ms.
func ownSession() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
