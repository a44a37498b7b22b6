package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Vigil daemons (up --vigils N, which needs --etcd): vigil1..vigilN run
// `VIGIL run --config DIR/vigilK/vigil.yaml` (RenderInstanceConfig), each
// with its own proxy and admin ports from the port plan and its own state
// directory DIR/vigilK/state, in their own session, logging to
// DIR/vigilK/vigil.log.

// vigilReadyTimeout bounds the wait for a daemon to listen.
const vigilReadyTimeout = 30 * time.Second

// ResolveVigilBinary is the absolute path of the vigil program: bin, or
// this executable when bin is empty.
func ResolveVigilBinary(bin string) (string, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("find the vigil binary: %w (pass --vigil-binary)", err)
		}
		bin = exe
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("vigil binary %q: %w", bin, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("vigil binary: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("vigil binary %s is not an executable file", abs)
	}
	return abs, nil
}

// writeVigilFiles creates DIR/vigilK, its state directory and its
// vigil.yaml for every daemon.
func writeVigilFiles(m *Manifest) error {
	for _, v := range m.Vigils {
		if err := os.MkdirAll(v.StateDir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", v.StateDir, err)
		}
		yml, err := RenderInstanceConfig(m, v)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(v.Config, yml, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// spawnVigil starts one daemon.
func spawnVigil(v VigilInstance) (int, error) {
	bin := v.Binary
	if bin == "" {
		var err error
		if bin, err = ResolveVigilBinary(""); err != nil {
			return 0, err
		}
	}
	return spawnProc(procSpec{
		name: v.Name,
		bin:  bin,
		args: []string{"run", "--config", v.Config},
		dir:  v.dir(),
		env:  os.Environ(),
		out:  v.Log,
		// Its own cgroup: isolate --from cuts it off from one node.
		cgroup: v.Cgroup,
	})
}

// vigilAnswers reports whether the daemon's admin port answers HTTP (any
// status) and its proxy port accepts TCP connections.
func vigilAnswers(ctx context.Context, v VigilInstance, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+v.Admin.Addr()+"/", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("admin %s: %w", v.Admin.Addr(), err)
	}
	_ = resp.Body.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", v.Proxy.Addr())
	if err != nil {
		return fmt.Errorf("proxy %s: %w", v.Proxy.Addr(), err)
	}
	return c.Close()
}

// waitVigil waits until a daemon answers (vigilAnswers), failing early,
// with the tail of its log, if it exits.
func waitVigil(ctx context.Context, v VigilInstance, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		if !procAlive(v.PID, v.proc()) {
			return true, fmt.Errorf("%s exited while starting: %s", v.Name, logTail(v.Log, 5))
		}
		if err := vigilAnswers(ctx, v, time.Second); err != nil {
			return false, fmt.Errorf("%s does not answer within %s (%v): %s", v.Name, timeout, err, logTail(v.Log, 5))
		}
		return true, nil
	})
}

// startVigilsAll starts every daemon at once and waits until each
// answers; pids are recorded in m as they come.
func (s *Sandbox) startVigilsAll(ctx context.Context, m *Manifest) error {
	t0 := time.Now()
	for i := range m.Vigils {
		pid, err := spawnVigil(m.Vigils[i])
		if err != nil {
			return err
		}
		m.Vigils[i].PID = pid
		if err := writeManifest(m.Dir, m); err != nil {
			return err
		}
	}
	if err := parallel(len(m.Vigils), func(i int) error {
		return waitVigil(ctx, m.Vigils[i], vigilReadyTimeout)
	}); err != nil {
		return err
	}
	s.log.Info("vigil daemons answer", "vigils", len(m.Vigils), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// startVigil runs a stopped daemon again with its config and waits until
// it answers.
func (s *Sandbox) startVigil(ctx context.Context, name string) error {
	if err := s.refresh(); err != nil {
		return err
	}
	m := s.Manifest()
	i, err := m.vigil(name)
	if err != nil {
		return err
	}
	v := m.Vigils[i]
	if procAlive(v.PID, v.proc()) {
		s.logger().Info("already running", "vigil", name, "pid", v.PID)
		return nil
	}
	if pids := procPIDs(v.proc()); len(pids) > 0 {
		return fmt.Errorf("%s already runs as pid %d, which sandbox.json does not record: run `vigil sandbox down` first", name, pids[0])
	}
	if _, err := os.Stat(v.Config); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: %s is gone", name, v.Config)
	}
	pid, err := spawnVigil(v)
	if err != nil {
		return err
	}
	v.PID = pid
	if err := s.update(ctx, func(m *Manifest) error {
		i, err := m.vigil(name)
		if err != nil {
			return err
		}
		m.Vigils[i].PID, m.Vigils[i].Paused = pid, false
		return nil
	}); err != nil {
		return err
	}
	return waitVigil(ctx, v, vigilReadyTimeout)
}
