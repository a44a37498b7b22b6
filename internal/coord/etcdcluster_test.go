package coord

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdMember is one member of a test etcd cluster on loopback.
type etcdMember struct {
	t         *testing.T
	bin, name string
	dir       string
	client    string // host:port
	args      []string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startEtcdCluster runs n real etcd members on free loopback ports with
// the given --heartbeat-interval and --election-timeout and --pre-vote
// (as the sandbox's; etcd 3.5 and later have it on) (skipped when
// Debian's etcd-server is not installed); every member is killed at the
// end of the test.
func startEtcdCluster(t *testing.T, n int, heartbeat, election time.Duration) []*etcdMember {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd not installed (scripts/install-deps.sh installs etcd-server)")
	}
	dir := t.TempDir()
	ms := make([]*etcdMember, n)
	var peers []string
	peerURL := make([]string, n)
	ports := freePorts(t, 2*n)
	for i := range ms {
		cp, pp := ports[2*i], ports[2*i+1]
		ms[i] = &etcdMember{t: t, bin: bin, name: fmt.Sprintf("e%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("e%d", i+1)),
			client: fmt.Sprintf("127.0.0.1:%d", cp)}
		peerURL[i] = fmt.Sprintf("http://127.0.0.1:%d", pp)
		peers = append(peers, ms[i].name+"="+peerURL[i])
	}
	for i, m := range ms {
		m.args = []string{"--name", m.name, "--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", "http://" + m.client, "--advertise-client-urls", "http://" + m.client,
			"--listen-peer-urls", peerURL[i], "--initial-advertise-peer-urls", peerURL[i],
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-token", "t",
			"--heartbeat-interval", fmt.Sprint(heartbeat.Milliseconds()), "--election-timeout", fmt.Sprint(election.Milliseconds()),
			"--pre-vote",
			"--logger", "zap", "--log-outputs", filepath.Join(m.dir, "etcd.log")}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		m.start()
		t.Cleanup(m.kill)
	}
	cli := testClient(t, ms)
	for _, m := range ms {
		m.waitHealthy(cli, 30*time.Second)
	}
	return ms
}

// freePorts returns n distinct free loopback ports. Every listener stays
// open until all are chosen: a port closed at once can be handed out
// again by the next Listen (it was, twice in one cluster: etcd refused
// "duplicate url").
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for range n {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func (m *etcdMember) start() {
	m.cmd = exec.Command(m.bin, m.args...)
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.done = make(chan struct{})
	cmd, done := m.cmd, m.done
	go func() { _ = cmd.Wait(); close(done) }()
}

// kill ends the member with SIGKILL (its data directory stays).
func (m *etcdMember) kill() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
}

// waitHealthy waits until the member answers Status and knows a leader.
func (m *etcdMember) waitHealthy(cli *clientv3.Client, d time.Duration) {
	m.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		st, err := cli.Status(ctx, m.client)
		cancel()
		if err == nil && st.Leader != 0 {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(m.dir, "etcd.log"))
			m.t.Fatalf("etcd member %s not healthy after %s (%v): %s", m.name, d, err, tail(b, 2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// testClient is an etcd client of the test itself, to every member.
func testClient(t *testing.T, ms []*etcdMember) *clientv3.Client {
	t.Helper()
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// etcdLeader is the member that leads, as the members other than skip say
// (nil: none of them names a live one yet).
func etcdLeader(cli *clientv3.Client, ms []*etcdMember, skip *etcdMember) *etcdMember {
	for _, m := range ms {
		if m == skip || m.cmd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		st, err := cli.Status(ctx, m.client)
		cancel()
		if err != nil || st.Leader == 0 {
			continue
		}
		if st.Leader == st.Header.MemberId {
			return m
		}
	}
	return nil
}
