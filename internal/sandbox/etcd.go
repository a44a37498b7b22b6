package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// An etcd cluster for Vigil's coordination (up --etcd N): members
// etcd1..etcdN of the Debian package etcd-server (/usr/bin/etcd, 3.4),
// each with its own data directory DIR/etcdK, its own client and peer
// ports from the port plan, listening on 127.0.0.1 only, logging to
// DIR/etcdK/etcd.log. The members run as root, in their own session and,
// where cgroup v2 allows, their own cgroup (so isolate can drop the
// connections a member opens to its peers).

// etcdReadyTimeout bounds the wait for a member to be healthy.
const etcdReadyTimeout = 30 * time.Second

// etcdHint says how to get etcd.
const etcdHint = "sudo scripts/install-deps.sh (or: apt-get install etcd-server etcd-client)"

// The members' raft timing: half etcd's defaults, so that the daemons'
// 2 s lease rides over a leader election (coord.CheckTiming).
const (
	EtcdHeartbeat       = 50 * time.Millisecond
	EtcdElectionTimeout = 500 * time.Millisecond
)

// MaxEtcd is the largest etcd cluster a sandbox runs; the sizes are 0
// (none), 1 and 3.
const MaxEtcd = 3

// findEtcd is the path of the etcd program.
func findEtcd() (string, error) {
	p, err := lookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("etcd not found (--etcd runs it): %s", etcdHint)
	}
	return p, nil
}

// etcdEnv is our environment without ETCD_* and ETCDCTL_* variables:
// etcd reads ETCD_<FLAG> as flags.
func etcdEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "ETCDCTL_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// etcdArgs are the arguments of a member; state is "new" when the cluster
// is created and "existing" when a member is started again (its data
// directory kept).
func etcdArgs(m *Manifest, e EtcdMember, state string) []string {
	peers := make([]string, len(m.Etcd))
	for i, o := range m.Etcd {
		peers[i] = o.Name + "=" + o.PeerURL()
	}
	return []string{
		"--name", e.Name,
		"--data-dir", e.DataDir,
		"--listen-client-urls", e.ClientURL(),
		"--advertise-client-urls", e.ClientURL(),
		"--listen-peer-urls", e.PeerURL(),
		"--initial-advertise-peer-urls", e.PeerURL(),
		"--initial-cluster", strings.Join(peers, ","),
		"--initial-cluster-state", state,
		"--initial-cluster-token", m.EtcdClusterToken,
		// A leader election of these members (at most about 2 election
		// timeouts, pre-vote keeping split votes from doubling it) is
		// shorter than what the daemons' lease_ttl rides over
		// (coordination.etcd.election_timeout, docs/ha.md).
		"--heartbeat-interval", fmt.Sprint(EtcdHeartbeat.Milliseconds()),
		"--election-timeout", fmt.Sprint(EtcdElectionTimeout.Milliseconds()),
		"--pre-vote",
		"--quota-backend-bytes", "268435456",
		// 3.4's default logger (capnslog) warns that it is deprecated.
		"--logger", "zap",
		"--log-outputs", "stderr",
	}
}

// spawnEtcd starts one member.
func spawnEtcd(bin string, m *Manifest, e EtcdMember, state string) (int, error) {
	if err := os.MkdirAll(e.DataDir, 0o700); err != nil {
		return 0, fmt.Errorf("create %s: %w", e.DataDir, err)
	}
	return spawnProc(procSpec{
		name:   e.Name,
		bin:    bin,
		args:   etcdArgs(m, e, state),
		dir:    e.DataDir,
		env:    etcdEnv(),
		out:    e.Log,
		cgroup: e.Cgroup,
	})
}

// etcdHealth asks a member's GET /health: answered is whether it answered
// HTTP at all, healthy whether it said "health":"true" (a member without
// a quorum answers 503 with "health":"false").
func etcdHealth(ctx context.Context, e EtcdMember, timeout time.Duration) (answered, healthy bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.ClientURL()+"/health", nil)
	if err != nil {
		return false, false, err
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	b := strings.Join(strings.Fields(string(body)), "")
	if strings.Contains(b, `"health":"true"`) {
		return true, true, nil
	}
	return true, false, fmt.Errorf("GET /health: %s %s", resp.Status, strings.TrimSpace(string(body)))
}

// waitEtcd waits until a member is healthy (GET /health says
// "health":"true") or, without healthy, until its client port accepts
// connections (a member without a quorum accepts them but answers no
// request until it has one); it fails early, with the tail of the
// member's log, if the process exits.
func waitEtcd(ctx context.Context, e EtcdMember, healthy bool, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, error) {
		if !procAlive(e.PID, e.proc()) {
			return true, fmt.Errorf("%s exited while starting: %s", e.Name, logTail(e.Log, 5))
		}
		if !healthy {
			d := net.Dialer{Timeout: time.Second}
			c, err := d.DialContext(ctx, "tcp", e.ClientAddr())
			if err != nil {
				return false, fmt.Errorf("%s does not listen on %s within %s (%v): %s", e.Name, e.ClientAddr(), timeout, err, logTail(e.Log, 5))
			}
			_ = c.Close()
			return true, nil
		}
		_, ok, err := etcdHealth(ctx, e, time.Second)
		if ok {
			return true, nil
		}
		return false, fmt.Errorf("%s is not healthy within %s (%v): %s", e.Name, timeout, err, logTail(e.Log, 5))
	})
}

// startEtcdAll starts every member at once (a cluster of 3 needs a quorum
// before any member is ready) and waits until each is healthy; pids are
// recorded in m as they come.
func (s *Sandbox) startEtcdAll(ctx context.Context, bin string, m *Manifest) error {
	t0 := time.Now()
	for i := range m.Etcd {
		pid, err := spawnEtcd(bin, m, m.Etcd[i], "new")
		if err != nil {
			return err
		}
		m.Etcd[i].PID = pid
		if err := writeManifest(m.Dir, m); err != nil {
			return err
		}
	}
	if err := parallel(len(m.Etcd), func(i int) error {
		return waitEtcd(ctx, m.Etcd[i], true, etcdReadyTimeout)
	}); err != nil {
		return err
	}
	s.log.Info("etcd cluster healthy", "members", len(m.Etcd), "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// startEtcd starts a stopped member again with the same flags but
// --initial-cluster-state existing and waits until it is healthy or, when
// too few members run for a quorum, until it listens (it cannot be
// healthy before more members run).
func (s *Sandbox) startEtcd(ctx context.Context, name string) error {
	if err := s.refresh(); err != nil {
		return err
	}
	m := s.Manifest()
	i, err := m.etcd(name)
	if err != nil {
		return err
	}
	e := m.Etcd[i]
	if procAlive(e.PID, e.proc()) {
		s.logger().Info("already running", "member", name, "pid", e.PID)
		return nil
	}
	if pids := procPIDs(e.proc()); len(pids) > 0 {
		return fmt.Errorf("%s already runs as pid %d, which sandbox.json does not record: run `vigil sandbox down` first", name, pids[0])
	}
	bin, err := findEtcd()
	if err != nil {
		return err
	}
	pid, err := spawnEtcd(bin, &m, e, "existing")
	if err != nil {
		return err
	}
	e.PID = pid
	if err := s.update(ctx, func(m *Manifest) error {
		i, err := m.etcd(name)
		if err != nil {
			return err
		}
		m.Etcd[i].PID, m.Etcd[i].Paused = pid, false
		return nil
	}); err != nil {
		return err
	}
	running := 1
	for _, o := range m.Etcd {
		if o.Name != name && procAlive(o.PID, o.proc()) {
			running++
		}
	}
	quorum := running > len(m.Etcd)/2
	if !quorum {
		s.logger().Warn(fmt.Sprintf("%s started, but too few members run for a quorum: it answers requests once more of them run", name))
	}
	return waitEtcd(ctx, e, quorum, etcdReadyTimeout)
}

// logTail is the last n non-empty lines of a log on one line, for error
// messages.
func logTail(path string, n int) string {
	var lines []string
	for _, l := range strings.Split(readTail(path, 16<<10), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "no log (see " + path + ")"
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "last log lines: " + strings.Join(lines, " | ") + " (see " + path + ")"
}

// errNoEtcd is returned for --vigils without --etcd.
var errNoEtcd = errors.New("--vigils needs --etcd: the Vigil daemons coordinate through etcd")
