package mtr

import (
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/router"
)

//go:embed users.txt
var usersTxt string

// Users are the accounts the selected tests log in as (users.txt): root,
// and the accounts tests create and then connect or change_user to. Vigil
// admits only users in its configuration, so they are all listed there;
// one that does not exist on the servers at that moment is refused by the
// server, as it would be direct.
func Users() []config.User {
	var users []config.User
	for _, line := range strings.Split(usersTxt, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		// Causal reads across sessions: a test is written for one server,
		// where a connection sees what another one just committed.
		u := config.User{Name: f[0], ReadYourWrites: router.RYWGlobal}
		if len(f) > 1 {
			u.Password = f[1]
		}
		users = append(users, u)
	}
	return users
}

// PoolIdleTimeout is the pool.idle_timeout of the derived configuration.
// Tests check that their sessions are gone by waiting, at most 10 s, for
// Threads_connected to drop back (include/wait_until_count_sessions.inc).
// Behind a pool it drops only when the pool closes idle server
// connections, 5 minutes by default: with 1 s it does within 2 s (the pool
// sweeps every second), as it would without a pool, and those tests run to
// their end through Vigil. Statements of a test follow each other within
// milliseconds, so sessions still share pooled connections.
const PoolIdleTimeout = time.Second

// VigilConfig writes to dst the Vigil configuration of src (a sandbox's
// vigil.yaml) with users added (a user src already has keeps its entry)
// and every cluster's pool.idle_timeout set to idle (unchanged when 0).
// The result is checked as Vigil would load it.
func VigilConfig(src, dst string, users []config.User, idle time.Duration) error {
	c, err := config.Load(src)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for i, u := range c.Users {
		have[u.Name] = true
		c.Users[i].ReadYourWrites = router.RYWGlobal // as for the test users below
	}
	for _, u := range users {
		if !have[u.Name] {
			c.Users = append(c.Users, u)
			have[u.Name] = true
		}
	}
	if idle > 0 {
		for i := range c.Clusters {
			c.Clusters[i].Pool.IdleTimeout = config.Duration{Duration: idle}
		}
	}
	data, err := c.Marshal()
	if err != nil {
		return err
	}
	if _, err := config.Parse(data); err != nil {
		return fmt.Errorf("the derived Vigil configuration does not validate: %w", err)
	}
	header := fmt.Sprintf("# Derived by compat/mtr from %s: the users mariadb-test-run's tests log in as, pool.idle_timeout %s.\n", src, idle)
	return os.WriteFile(dst, append([]byte(header), data...), 0o644)
}

// StartVigil runs "bin run --config cfg", its output to logPath, and
// waits until it listens on addr. stop ends it (SIGTERM, SIGKILL after 10 s).
func StartVigil(bin, cfg, logPath, addr string) (stop func(), err error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", cfg)
	cmd.Stdout, cmd.Stderr = f, f
	// Killed with this process, even when it exits without stop (a test
	// binary's SIGINT).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			data, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("vigil exited at start: %s", strings.TrimSpace(string(data)))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return stop, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	return nil, fmt.Errorf("vigil did not listen on %s within 20s", addr)
}
