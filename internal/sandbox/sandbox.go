// Package sandbox owns local topologies of real mariadbd processes for
// development, demos and end-to-end tests: primary/replica replication with
// MariaDB GTID (optionally semi-synchronous), Galera clusters and standalone
// servers. It creates the datadirs, writes one my.cnf per node, starts and
// stops the servers (each in its own session and, where cgroup v2 allows, its
// own cgroup), injects failures (kill, pause, network isolation with
// iptables) and reports what each node currently is.
//
// Everything a sandbox is lives under one directory; sandbox.json in that
// directory is the manifest every command reads, so the CLI and tests can
// drive the same sandbox from different processes.
package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Topology is the shape of a sandbox.
type Topology string

// The topologies a sandbox can have.
const (
	Replication Topology = "replication"
	Galera      Topology = "galera"
	Standalone  Topology = "standalone"
)

// ParseTopology accepts replication, galera or standalone.
func ParseTopology(s string) (Topology, error) {
	switch t := Topology(strings.ToLower(strings.TrimSpace(s))); t {
	case Replication, Galera, Standalone:
		return t, nil
	}
	return "", fmt.Errorf("unknown topology %q: use replication, galera or standalone", s)
}

// Roles recorded for nodes and reported by Status.
const (
	RolePrimary    = "primary"
	RoleReplica    = "replica"
	RoleGalera     = "galera"
	RoleStandalone = "standalone"
)

// Host is the only address sandbox servers listen on.
const Host = "127.0.0.1"

// File names inside a sandbox directory.
const (
	ManifestFile = "sandbox.json"
	ConfigFile   = "vigil.yaml"
	lockFile     = ".sandbox.lock"
	bootstrapSQL = "bootstrap.sql"
	stateDir     = "state"
)

// Options describe a sandbox to create. The zero value of every field but
// Dir has a useful default.
type Options struct {
	// Dir holds everything of the sandbox; it is created if missing.
	Dir string
	// Topology defaults to replication.
	Topology Topology
	// Nodes defaults to 3 (replication, galera) or 1 (standalone); with
	// Clusters, per cluster.
	Nodes int
	// Clusters is the number of replication clusters (1..MaxClusters;
	// 0 means 1; see clusters.go), each of Nodes nodes with its own
	// primary, GTID domain and cluster in vigil.yaml.
	Clusters int
	// BasePort gives node K port BasePort+K-1 (see PortPlan); 0 picks a
	// free block at random.
	BasePort int
	// SemiSync turns on semi-synchronous replication (replication only).
	SemiSync bool
	// Etcd is the number of etcd members to run (0, 1 or 3): an etcd
	// cluster etcd1..etcdN on 127.0.0.1 for Vigil's coordination.
	Etcd int
	// Vigils is the number of Vigil daemons to run (0..3; needs Etcd):
	// vigil1..vigilN, each with its own DIR/vigilK/vigil.yaml.
	Vigils int
	// Agents runs a vigil agent beside every node (agent1..agentN, at
	// most MaxAgentNodes nodes and spares), with certificates in
	// DIR/agents/certs.
	Agents bool
	// Spares is the number of spare hosts to run (spare1..spareN, see
	// spares.go; at most MaxSpares): each an empty, read-only mariadbd
	// that replicates from nobody, with an agent. Implies Agents.
	Spares int
	// SelfHealing writes lifecycle.self_healing: true into vigil.yaml.
	// Implies Agents: Vigil heals only through the agents.
	SelfHealing bool
	// ReplaceAfter, when not zero, is lifecycle.replace_after in
	// vigil.yaml (tests and demos shorten the default 5m).
	ReplaceAfter time.Duration
	// VigilBinary is the vigil program the daemons and agents run (`VigilBinary run
	// --config DIR/vigilK/vigil.yaml`); empty means this executable.
	VigilBinary string
	// Logger receives progress; nil discards it.
	Logger *slog.Logger
}

// Endpoint is a host and port.
type Endpoint struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Addr is host:port.
func (e Endpoint) Addr() string { return fmt.Sprintf("%s:%d", e.Host, e.Port) }

// Account is a user name and password.
type Account struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// Accounts are the accounts every node has (root logs in over the unix
// socket only).
type Accounts struct {
	App     Account `json:"app"`
	Monitor Account `json:"monitor"`
	Repl    Account `json:"repl"`
}

// DefaultAccounts are the accounts a sandbox creates.
func DefaultAccounts() Accounts {
	return Accounts{
		App:     Account{User: "app", Password: "app"},
		Monitor: Account{User: "monitor", Password: "monitor"},
		Repl:    Account{User: "repl", Password: "repl"},
	}
}

// Node is one server of a sandbox as recorded in the manifest.
type Node struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Socket   string `json:"socket"`
	Datadir  string `json:"datadir"`
	PID      int    `json:"pid"`
	Role     string `json:"role"`
	ServerID int    `json:"server_id"`
	Config   string `json:"config"`
	ErrorLog string `json:"error_log"`
	PIDFile  string `json:"pid_file"`
	// Galera ports; zero for other topologies.
	GcommPort int `json:"gcomm_port,omitempty"`
	ISTPort   int `json:"ist_port,omitempty"`
	SSTPort   int `json:"sst_port,omitempty"`
	// Cgroup is the node's cgroup v2 path relative to the cgroup2 root, used
	// to drop its outgoing traffic on isolate; empty when unavailable.
	Cgroup string `json:"cgroup,omitempty"`
	// Failure injection state.
	Paused   bool `json:"paused,omitempty"`
	Isolated bool `json:"isolated,omitempty"`
	// Cluster names the node's cluster in a sandbox of several (up
	// --clusters); empty otherwise.
	Cluster string `json:"cluster,omitempty"`
}

// Addr is the node's TCP address.
func (n Node) Addr() string { return fmt.Sprintf("%s:%d", n.Host, n.Port) }

// dir is the node's own directory.
func (n Node) dir() string { return filepath.Dir(n.Config) }

// tmpdir is the node's own temporary directory.
func (n Node) tmpdir() string { return filepath.Join(n.dir(), "tmp") }

// ports are every TCP port the node listens on.
func (n Node) ports() []int {
	ps := []int{n.Port}
	for _, p := range []int{n.GcommPort, n.ISTPort, n.SSTPort} {
		if p != 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// EtcdMember is one member of the sandbox's etcd cluster as recorded in
// the manifest. It runs as `etcd --name etcdK --data-dir DIR/etcdK ...`
// (see etcdArgs), listening on 127.0.0.1 only.
type EtcdMember struct {
	Name       string `json:"name"`
	Host       string `json:"host"`
	ClientPort int    `json:"client_port"`
	PeerPort   int    `json:"peer_port"`
	DataDir    string `json:"data_dir"`
	// Log gets the member's stdout and stderr: DIR/etcdK/etcd.log.
	Log string `json:"log"`
	PID int    `json:"pid"`
	// Cgroup is the member's cgroup v2 path (see Node.Cgroup), used to
	// drop the connections it opens itself on isolate; empty when
	// unavailable.
	Cgroup string `json:"cgroup,omitempty"`
	// Failure injection state.
	Paused   bool `json:"paused,omitempty"`
	Isolated bool `json:"isolated,omitempty"`
}

// ClientAddr is host:client_port.
func (e EtcdMember) ClientAddr() string { return fmt.Sprintf("%s:%d", e.Host, e.ClientPort) }

// ClientURL is the member's client URL.
func (e EtcdMember) ClientURL() string { return "http://" + e.ClientAddr() }

// PeerURL is the member's peer URL.
func (e EtcdMember) PeerURL() string { return fmt.Sprintf("http://%s:%d", e.Host, e.PeerPort) }

// proc identifies the member's process by its data directory.
func (e EtcdMember) proc() procID { return procID{flag: "--data-dir", value: e.DataDir} }

// dir is the member's own directory (its data directory).
func (e EtcdMember) dir() string { return e.DataDir }

// VigilInstance is one Vigil daemon the sandbox runs, as recorded in the
// manifest: `Binary run --config Config`.
type VigilInstance struct {
	Name   string `json:"name"`
	Binary string `json:"binary"`
	// Config is DIR/vigilK/vigil.yaml.
	Config   string   `json:"config"`
	Proxy    Endpoint `json:"proxy"`
	Admin    Endpoint `json:"admin"`
	StateDir string   `json:"state_dir"`
	// SourceAddress is the local address the daemon connects to etcd
	// from (coordination.etcd.source_address): 127.0.0.(10+K), so that
	// isolate can cut it off from etcd alone.
	SourceAddress string `json:"source_address"`
	// Cgroup is the daemon's cgroup v2 path (see Node.Cgroup), used to
	// cut it off from one node only (isolate --from).
	Cgroup string `json:"cgroup,omitempty"`
	// Log gets the daemon's stdout and stderr: DIR/vigilK/vigil.log.
	Log string `json:"log"`
	PID int    `json:"pid"`
	// Failure injection state.
	Paused   bool `json:"paused,omitempty"`
	Isolated bool `json:"isolated,omitempty"`
	// ClusterProxies are the daemon's listeners by cluster name in a
	// sandbox of several clusters (the first cluster's is Proxy); absent
	// otherwise.
	ClusterProxies map[string]Endpoint `json:"cluster_proxies,omitempty"`
	// Shards is the daemon's sharded listener in a sandbox of several
	// clusters; absent otherwise.
	Shards *Endpoint `json:"shards,omitempty"`
}

// proc identifies the daemon's process by its --config.
func (v VigilInstance) proc() procID { return procID{flag: "--config", value: v.Config} }

// dir is the daemon's own directory.
func (v VigilInstance) dir() string { return filepath.Dir(v.Config) }

// Manifest is the content of sandbox.json.
type Manifest struct {
	Topology Topology `json:"topology"`
	Dir      string   `json:"dir"`
	SemiSync bool     `json:"semi_sync"`
	Nodes    []Node   `json:"nodes"`
	Proxy    Endpoint `json:"proxy"`
	Admin    Endpoint `json:"admin"`
	Accounts Accounts `json:"accounts"`
	// BasePort is the first port of the block the sandbox uses.
	BasePort int `json:"base_port"`
	// AdminToken is the token of the admin API in vigil.yaml (random per
	// sandbox): the admin API never runs open.
	AdminToken string `json:"admin_token,omitempty"`
	// Etcd are the members of the sandbox's etcd cluster (up --etcd N);
	// absent without one.
	Etcd []EtcdMember `json:"etcd,omitempty"`
	// EtcdClusterToken is the cluster's --initial-cluster-token, unique
	// per sandbox.
	EtcdClusterToken string `json:"etcd_cluster_token,omitempty"`
	// Vigils are the Vigil daemons the sandbox runs (up --vigils N);
	// absent without them.
	Vigils []VigilInstance `json:"vigils,omitempty"`
	// Agents are the datadir agents, one per node and spare (up
	// --agents); absent without them. Spares are among Nodes, with role
	// spare (spares.go).
	Agents []AgentInstance `json:"agents,omitempty"`
	// SelfHealing and ReplaceAfter are what up --self-healing and
	// --replace-after put into vigil.yaml's lifecycle section.
	SelfHealing  bool          `json:"self_healing,omitempty"`
	ReplaceAfter time.Duration `json:"replace_after,omitempty"`
	// Clusters are the replication clusters of a sandbox of several (up
	// --clusters N); absent with one. The first is named ClusterName and
	// its Proxy is the Proxy above.
	Clusters []Cluster `json:"clusters,omitempty"`
	// Shards is the address reserved for Vigil's sharded listener in a
	// sandbox of several clusters; absent with one.
	Shards *Endpoint `json:"shards,omitempty"`
}

func (m *Manifest) clone() Manifest {
	c := *m
	c.Nodes = append([]Node(nil), m.Nodes...)
	if m.Etcd != nil {
		c.Etcd = append([]EtcdMember(nil), m.Etcd...)
	}
	if m.Vigils != nil {
		c.Vigils = append([]VigilInstance(nil), m.Vigils...)
	}
	if m.Agents != nil {
		c.Agents = append([]AgentInstance(nil), m.Agents...)
	}
	if m.Clusters != nil {
		c.Clusters = append([]Cluster(nil), m.Clusters...)
	}
	return c
}

// EtcdEndpoints are the client addresses (127.0.0.1:PORT) of the etcd
// members, in order; nil without etcd.
func (m *Manifest) EtcdEndpoints() []string {
	var out []string
	for _, e := range m.Etcd {
		out = append(out, e.ClientAddr())
	}
	return out
}

// names lists every member name of the sandbox: nodes, etcd members,
// Vigil daemons.
func (m *Manifest) names() []string {
	var names []string
	for _, n := range m.Nodes {
		names = append(names, n.Name)
	}
	for _, e := range m.Etcd {
		names = append(names, e.Name)
	}
	for _, v := range m.Vigils {
		names = append(names, v.Name)
	}
	return names
}

// etcd is the index of the named etcd member.
func (m *Manifest) etcd(name string) (int, error) {
	for i := range m.Etcd {
		if m.Etcd[i].Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("unknown etcd member %q: this sandbox has %s", name, strings.Join(m.names(), ", "))
}

// vigil is the index of the named Vigil daemon.
func (m *Manifest) vigil(name string) (int, error) {
	for i := range m.Vigils {
		if m.Vigils[i].Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("unknown vigil %q: this sandbox has %s", name, strings.Join(m.names(), ", "))
}

func (m *Manifest) node(name string) (int, error) {
	for i := range m.Nodes {
		if m.Nodes[i].Name == name {
			return i, nil
		}
	}
	return -1, fmt.Errorf("unknown node %q: this sandbox has %s", name, strings.Join(m.names(), ", "))
}

// Sandbox is a handle on a sandbox directory. Its methods are safe for
// concurrent use; every change is written to sandbox.json under a file
// lock, so other processes (the CLI) see it.
type Sandbox struct {
	dir string
	log *slog.Logger

	mu sync.Mutex
	m  Manifest
}

// ErrNoSandbox is returned by Load when the directory has no sandbox.json.
var ErrNoSandbox = errors.New("no sandbox")

// Load opens the sandbox in dir.
func Load(dir string) (*Sandbox, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox dir %q: %w", dir, err)
	}
	m, err := readManifest(abs)
	if err != nil {
		return nil, err
	}
	return &Sandbox{dir: abs, log: discardLogger(), m: *m}, nil
}

// SetLogger sets where progress goes; nil discards it.
func (s *Sandbox) SetLogger(l *slog.Logger) {
	if l == nil {
		l = discardLogger()
	}
	s.mu.Lock()
	s.log = l
	s.mu.Unlock()
}

func (s *Sandbox) logger() *slog.Logger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Dir is the sandbox directory (absolute).
func (s *Sandbox) Dir() string { return s.dir }

// ManifestPath is DIR/sandbox.json.
func (s *Sandbox) ManifestPath() string { return filepath.Join(s.dir, ManifestFile) }

// ConfigPath is DIR/vigil.yaml, a Vigil configuration for this sandbox.
func (s *Sandbox) ConfigPath() string { return filepath.Join(s.dir, ConfigFile) }

// Manifest is a snapshot of the manifest as last read or written.
func (s *Sandbox) Manifest() Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m.clone()
}

// Topology of the sandbox.
func (s *Sandbox) Topology() Topology { return s.Manifest().Topology }

// Nodes is a snapshot of the nodes, without the spares (see Spares).
func (s *Sandbox) Nodes() []Node {
	m := s.Manifest()
	return m.members()
}

// NodeNames are node1..nodeN (not the spares).
func (s *Sandbox) NodeNames() []string {
	ns := s.Nodes()
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

// Node returns the named node or spare, or an error listing the valid
// names.
func (s *Sandbox) Node(name string) (Node, error) {
	m := s.Manifest()
	i, err := m.node(name)
	if err != nil {
		return Node{}, err
	}
	return m.Nodes[i], nil
}

// Addr is the TCP address of a node, or "" for an unknown node.
func (s *Sandbox) Addr(name string) string {
	n, err := s.Node(name)
	if err != nil {
		return ""
	}
	return n.Addr()
}

// ProxyAddr is the address reserved for Vigil's proxy listener.
func (s *Sandbox) ProxyAddr() string { return s.Manifest().Proxy.Addr() }

// AdminAddr is the address reserved for Vigil's admin listener.
func (s *Sandbox) AdminAddr() string { return s.Manifest().Admin.Addr() }

// Accounts of the sandbox.
func (s *Sandbox) Accounts() Accounts { return s.Manifest().Accounts }

// DSN is a go-sql-driver DSN for a node over TCP, or "" for an unknown
// node. db may be empty.
func (s *Sandbox) DSN(name, user, pass, db string) string {
	n, err := s.Node(name)
	if err != nil {
		return ""
	}
	return TCPDSN(n.Addr(), user, pass, db)
}

// TCPDSN is a go-sql-driver DSN for addr.
func TCPDSN(addr, user, pass, db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, pass, "tcp", addr, db
	return cfg.FormatDSN()
}

// SocketDSN is a go-sql-driver DSN that logs in as root over the node's
// unix socket (root authenticates with unix_socket, so the caller must run
// as OS user root), or "" for an unknown node.
func (s *Sandbox) SocketDSN(name, db string) string {
	n, err := s.Node(name)
	if err != nil {
		return ""
	}
	return socketConfig(n.Socket, db, 0).FormatDSN()
}

// refresh re-reads sandbox.json so the handle sees changes made by other
// processes.
func (s *Sandbox) refresh() error {
	m, err := readManifest(s.dir)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.m = *m
	s.mu.Unlock()
	return nil
}

// update applies fn to the current manifest on disk under the directory
// lock and writes the result.
func (s *Sandbox) update(ctx context.Context, fn func(m *Manifest) error) error {
	unlock, err := lockDir(ctx, s.dir, 10*time.Second)
	if err != nil {
		return err
	}
	defer unlock()
	m, err := readManifest(s.dir)
	if err != nil {
		return err
	}
	if err := fn(m); err != nil {
		return err
	}
	if err := writeManifest(s.dir, m); err != nil {
		return err
	}
	s.mu.Lock()
	s.m = *m
	s.mu.Unlock()
	return nil
}

func readManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (no %s; create one with: vigil sandbox up --dir %s)", ErrNoSandbox, dir, ManifestFile, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if len(m.Nodes) == 0 {
		return nil, fmt.Errorf("%s lists no nodes", filepath.Join(dir, ManifestFile))
	}
	sort.SliceStable(m.Nodes, func(i, j int) bool { return m.Nodes[i].ServerID < m.Nodes[j].ServerID })
	return &m, nil
}

// MarshalManifest is the exact sandbox.json document.
func MarshalManifest(m *Manifest) ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// writeManifest replaces sandbox.json atomically so readers without the
// lock never see half a file.
func writeManifest(dir string, m *Manifest) error {
	data, err := MarshalManifest(m)
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	return writeFileAtomic(filepath.Join(dir, ManifestFile), data, 0o644)
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// lockDir takes an exclusive flock on DIR/.sandbox.lock, waiting at most
// wait.
func lockDir(ctx context.Context, dir string, wait time.Duration) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock sandbox: %w", err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("another vigil sandbox command is working on %s (lock held for over %s)", dir, wait)
			}
			return nil, fmt.Errorf("lock sandbox: %w", err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
