package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Bounds of the waits of Up and Start.
const (
	answerTimeout      = 60 * time.Second
	galeraJoinTimeout  = 180 * time.Second
	replicatingTimeout = 60 * time.Second
	stopGrace          = 20 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Topology == "" {
		o.Topology = Replication
	}
	if o.Nodes == 0 {
		o.Nodes = 3
		if o.Topology == Standalone {
			o.Nodes = 1
		}
	}
	if o.Clusters == 0 {
		o.Clusters = 1
	}
	if o.Logger == nil {
		o.Logger = discardLogger()
	}
	if o.Spares > 0 || o.SelfHealing {
		o.Agents = true
	}
	return o
}

func (o Options) validate() error {
	if o.Dir == "" {
		return errors.New("no sandbox directory: pass --dir DIR (or set VIGIL_SANDBOX_DIR)")
	}
	if _, err := ParseTopology(string(o.Topology)); err != nil {
		return err
	}
	if o.Nodes < 1 || o.Nodes > MaxNodes {
		return fmt.Errorf("--nodes must be between 1 and %d, not %d", MaxNodes, o.Nodes)
	}
	if err := o.validateClusters(); err != nil {
		return err
	}
	if o.SemiSync && o.Topology != Replication {
		return fmt.Errorf("--semi-sync needs --topology replication, not %s", o.Topology)
	}
	if o.SemiSync && o.Nodes < 2 {
		return errors.New("--semi-sync needs at least 2 nodes: a primary alone would block every commit")
	}
	if o.Etcd != 0 && o.Etcd != 1 && o.Etcd != MaxEtcd {
		return fmt.Errorf("--etcd must be 0, 1 or 3 (members of the etcd cluster), not %d", o.Etcd)
	}
	if o.Vigils < 0 || o.Vigils > MaxVigils {
		return fmt.Errorf("--vigils must be between 0 and %d, not %d", MaxVigils, o.Vigils)
	}
	if o.Vigils > 0 && o.Etcd == 0 {
		return errNoEtcd
	}
	if all := o.Nodes*max(o.Clusters, 1) + o.Spares; o.Agents && all > MaxAgentNodes {
		return fmt.Errorf("--agents runs one agent per node and spare on ports base+%d.., for at most %d, not %d", agentOffset, MaxAgentNodes, all)
	}
	if o.Spares < 0 || o.Spares > MaxSpares {
		return fmt.Errorf("--spares must be between 0 and %d, not %d", MaxSpares, o.Spares)
	}
	if o.Spares > 0 && o.Topology == Galera {
		return errors.New("--spares needs --topology replication or standalone: a Galera joiner takes a state transfer, not a clone")
	}
	if o.ReplaceAfter < 0 {
		return fmt.Errorf("--replace-after must not be negative, not %s", o.ReplaceAfter)
	}
	if o.SelfHealing && o.Topology == Galera {
		return errors.New("--self-healing applies to replication sandboxes: Galera nodes rejoin by themselves")
	}
	return nil
}

// Up creates and starts a sandbox, waits until every node answers and
// replication runs (or Galera is Synced everywhere), then writes
// sandbox.json and vigil.yaml. With Options.Etcd it first starts an etcd
// cluster and waits until every member is healthy; with Options.Vigils it
// last writes DIR/vigilK/vigil.yaml and starts the Vigil daemons, and
// waits until each answers. On failure it stops what it started and
// leaves the files (error logs) in place.
func Up(ctx context.Context, o Options) (*Sandbox, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	bins, err := findBinaries(o.Topology)
	if err != nil {
		return nil, err
	}
	etcdBin := ""
	if o.Etcd > 0 {
		if etcdBin, err = findEtcd(); err != nil {
			return nil, err
		}
	}
	if o.Vigils > 0 || o.Agents {
		if o.VigilBinary, err = ResolveVigilBinary(o.VigilBinary); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("must run as root: the servers run as user mysql, their files are chowned to it and isolate uses iptables")
	}
	if _, err := user.Lookup("mysql"); err != nil {
		return nil, fmt.Errorf("no OS user mysql (the servers run as it): %s", installHint)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("sandbox dir %q: %w", o.Dir, err)
	}
	if len(filepath.Join(dir, "node00", "mysqld.sock")) > 100 {
		return nil, fmt.Errorf("sandbox dir %s is too long: unix socket paths are limited to 107 bytes; use a shorter --dir", dir)
	}
	if err := refuseRunning(dir); err != nil {
		return nil, err
	}
	plan, err := planFor(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := prepareDir(ctx, dir); err != nil {
		return nil, err
	}
	unlock, err := lockDir(ctx, dir, 0)
	if err != nil {
		return nil, err
	}
	defer unlock()
	m := newManifest(dir, o, plan, canUseCgroups(dir))
	s := &Sandbox{dir: dir, log: o.Logger, m: *m}
	s.log.Info("creating sandbox", "dir", dir, "topology", o.Topology, "nodes", len(m.Nodes), "clusters", len(m.clusters()), "base_port", plan.Base)
	if err := writeNodeFiles(m); err != nil {
		return nil, err
	}
	if err := writeManifest(dir, m); err != nil {
		return nil, err
	}
	if err := installAll(ctx, bins, m); err != nil {
		return nil, err
	}
	if len(m.Etcd) > 0 {
		if err := s.startEtcdAll(ctx, etcdBin, m); err != nil {
			s.abort(m)
			return nil, err
		}
	}
	if err := s.startAll(ctx, bins, m); err != nil {
		s.abort(m)
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, stateDir), 0o755); err != nil {
		s.abort(m)
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if o.Agents {
		// Recorded before vigil.yaml, which names each server's agent
		// and each spare.
		addAgents(m, o.VigilBinary)
		if err := addSpares(m, o.Spares, o.VigilBinary); err != nil {
			s.abort(m)
			return nil, err
		}
	}
	yml, err := RenderVigilConfig(m)
	if err != nil {
		s.abort(m)
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, ConfigFile), yml, 0o644); err != nil {
		s.abort(m)
		return nil, err
	}
	if o.Agents {
		if err := writeAgentFiles(m); err != nil {
			s.abort(m)
			return nil, err
		}
		if err := s.startAgentsAll(ctx, m); err != nil {
			s.abort(m)
			return nil, err
		}
		for _, sp := range m.spares() {
			if err := s.startSpare(ctx, bins, m, sp.Name); err != nil {
				s.abort(m)
				return nil, err
			}
		}
	}
	if len(m.Vigils) > 0 {
		if err := writeVigilFiles(m); err != nil {
			s.abort(m)
			return nil, err
		}
		if err := s.startVigilsAll(ctx, m); err != nil {
			s.abort(m)
			return nil, err
		}
	}
	if err := writeManifest(dir, m); err != nil {
		s.abort(m)
		return nil, err
	}
	s.mu.Lock()
	s.m = *m
	s.mu.Unlock()
	return s, nil
}

// prepareDir creates dir, makes it and its parents traversable by the
// mysql user, refuses a running sandbox and clears a stopped one.
func prepareDir(ctx context.Context, dir string) error {
	if err := refuseRunning(dir); err != nil {
		return err
	}
	if old, err := readManifest(dir); err == nil {
		// A stopped sandbox: start afresh.
		_ = healRules(ctx, dir, "")
		removeEtcdCgroups(old.Etcd)
		removeVigilCgroups(old.Vigils)
		removeCgroups(dir, old.Nodes)
		for _, n := range old.Nodes {
			if filepath.Dir(n.dir()) == dir {
				if err := os.RemoveAll(n.dir()); err != nil {
					return fmt.Errorf("remove old %s: %w", n.Name, err)
				}
			}
		}
		for _, a := range auxRefs(old) {
			d, name := "", a.name()
			if a.etcd != nil {
				d = a.etcd.dir()
			} else {
				d = a.vigil.dir()
			}
			if filepath.Dir(d) == dir {
				if err := os.RemoveAll(d); err != nil {
					return fmt.Errorf("remove old %s: %w", name, err)
				}
			}
		}
		for _, f := range []string{ManifestFile, ConfigFile, bootstrapSQL, stateDir, agentsDir} {
			_ = os.RemoveAll(filepath.Join(dir, f))
		}
	} else if !errors.Is(err, ErrNoSandbox) {
		return err
	} else if _, err := os.Stat(filepath.Join(dir, "node1")); err == nil {
		return fmt.Errorf("%s/node1 exists but %s has no %s: remove it or use another --dir", dir, dir, ManifestFile)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return makeTraversable(dir)
}

// refuseRunning fails if dir holds a sandbox with a running server.
func refuseRunning(dir string) error {
	old, err := readManifest(dir)
	if err != nil {
		return nil
	}
	for _, n := range old.Nodes {
		if processAlive(n.PID, n.Config) || len(serverPIDs(n.Config)) > 0 {
			return fmt.Errorf("%s already holds a running sandbox (%s is running): run `vigil sandbox down --dir %s` first", dir, n.Name, dir)
		}
	}
	for _, a := range auxRefs(old) {
		if procAlive(a.pid(), a.proc()) || len(procPIDs(a.proc())) > 0 {
			return fmt.Errorf("%s already holds a running sandbox (%s is running): run `vigil sandbox down --dir %s` first", dir, a.name(), dir)
		}
	}
	for _, a := range old.Agents {
		if procAlive(a.PID, a.proc()) || len(procPIDs(a.proc())) > 0 {
			return fmt.Errorf("%s already holds a running sandbox (%s is running): run `vigil sandbox down --dir %s` first", dir, a.Name, dir)
		}
	}
	return nil
}

// makeTraversable gives "others" execute permission on dir and every
// parent that lacks it (t.TempDir() makes 0700 directories), so mariadbd
// running as mysql can reach its files.
func makeTraversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		want := st.Mode().Perm() | 0o001
		if d == dir {
			want |= 0o055
		}
		if want != st.Mode().Perm() {
			if err := os.Chmod(d, want); err != nil {
				return fmt.Errorf("%s is not traversable by user mysql and chmod failed: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func planFor(ctx context.Context, o Options) (PortPlan, error) {
	if o.BasePort == 0 {
		return choosePlan(ctx, optionsSpan(o), func(base int) (PortPlan, error) { return planPorts(base, o) })
	}
	plan, err := planPorts(o.BasePort, o)
	if err != nil {
		return plan, err
	}
	return plan, checkFree(ctx, plan)
}

// newManifest lays out the nodes of a sandbox.
func newManifest(dir string, o Options, plan PortPlan, cgroups bool) *Manifest {
	m := &Manifest{
		Topology:     o.Topology,
		Dir:          dir,
		SemiSync:     o.SemiSync,
		Proxy:        Endpoint{Host: Host, Port: plan.Proxy},
		Admin:        Endpoint{Host: Host, Port: plan.Admin},
		Accounts:     DefaultAccounts(),
		BasePort:     plan.Base,
		AdminToken:   randomToken(),
		SelfHealing:  o.SelfHealing,
		ReplaceAfter: o.ReplaceAfter,
	}
	// Nodes per cluster: all of them unless up --clusters.
	per := len(plan.Nodes) / max(o.Clusters, 1)
	for i, p := range plan.Nodes {
		name := "node" + strconv.Itoa(i+1)
		nd := filepath.Join(dir, name)
		n := Node{
			Name:      name,
			Host:      Host,
			Port:      p.MySQL,
			Socket:    filepath.Join(nd, "mysqld.sock"),
			Datadir:   filepath.Join(nd, "data"),
			ServerID:  i + 1,
			Config:    filepath.Join(nd, "my.cnf"),
			ErrorLog:  filepath.Join(nd, "error.log"),
			PIDFile:   filepath.Join(nd, "mysqld.pid"),
			GcommPort: p.Gcomm,
			ISTPort:   p.IST,
			SSTPort:   p.SST,
		}
		switch {
		case o.Topology == Galera:
			n.Role = RoleGalera
		case o.Topology == Standalone:
			n.Role = RoleStandalone
		case i%per == 0:
			// The first node of each cluster.
			n.Role = RolePrimary
		default:
			n.Role = RoleReplica
		}
		if cgroups {
			n.Cgroup = sandboxCgroup(dir) + "/" + name
		}
		m.Nodes = append(m.Nodes, n)
	}
	if len(plan.Etcd) > 0 {
		m.EtcdClusterToken = "vigil-sandbox-" + randomToken()
	}
	for i, p := range plan.Etcd {
		name := "etcd" + strconv.Itoa(i+1)
		d := filepath.Join(dir, name)
		e := EtcdMember{
			Name: name, Host: Host, ClientPort: p.Client, PeerPort: p.Peer,
			DataDir: d, Log: filepath.Join(d, "etcd.log"),
		}
		if cgroups {
			e.Cgroup = sandboxCgroup(dir) + "/" + name
		}
		m.Etcd = append(m.Etcd, e)
	}
	for i, p := range plan.Vigils {
		name := "vigil" + strconv.Itoa(i+1)
		d := filepath.Join(dir, name)
		cg := ""
		if cgroups {
			cg = sandboxCgroup(dir) + "/" + name
		}
		m.Vigils = append(m.Vigils, VigilInstance{
			Cgroup:        cg,
			Name:          name,
			Binary:        o.VigilBinary,
			Config:        filepath.Join(d, ConfigFile),
			Proxy:         Endpoint{Host: Host, Port: p.Proxy},
			Admin:         Endpoint{Host: Host, Port: p.Admin},
			StateDir:      filepath.Join(d, stateDir),
			SourceAddress: vigilSourceAddress(i + 1),
			Log:           filepath.Join(d, "vigil.log"),
		})
	}
	layoutClusters(m, plan, per)
	return m
}

// vigilSourceAddress is the local address vigilK connects to etcd from:
// 127.0.0.(10+K), on lo like every 127/8 address.
func vigilSourceAddress(k int) string { return fmt.Sprintf("127.0.0.%d", 10+k) }

// writeNodeFiles creates the node directories (owned by mysql), their
// my.cnf and the bootstrap SQL.
func writeNodeFiles(m *Manifest) error {
	u, err := user.Lookup("mysql")
	if err != nil {
		return fmt.Errorf("user mysql: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	host, _ := os.Hostname()
	if err := os.WriteFile(filepath.Join(m.Dir, bootstrapSQL), []byte(renderBootstrapSQL(m.Accounts, host)), 0o644); err != nil {
		return fmt.Errorf("write bootstrap SQL: %w", err)
	}
	for _, n := range m.Nodes {
		if err := os.MkdirAll(n.dir(), 0o750); err != nil {
			return fmt.Errorf("create %s: %w", n.dir(), err)
		}
		if err := os.WriteFile(n.Config, []byte(renderMyCnf(m, n)), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", n.Config, err)
		}
		if err := os.MkdirAll(n.tmpdir(), 0o750); err != nil {
			return fmt.Errorf("create %s: %w", n.tmpdir(), err)
		}
		for _, d := range []string{n.dir(), n.tmpdir()} {
			if err := os.Chown(d, uid, gid); err != nil {
				return fmt.Errorf("chown %s: %w", d, err)
			}
		}
	}
	return nil
}

// installAll runs mariadb-install-db for every node at once.
func installAll(ctx context.Context, bins binaries, m *Manifest) error {
	return parallel(len(m.Nodes), func(i int) error {
		n := m.Nodes[i]
		logPath := filepath.Join(n.dir(), "install.log")
		out, err := os.Create(logPath)
		if err != nil {
			return err
		}
		defer out.Close()
		cmd := exec.CommandContext(ctx, bins.installDB,
			"--no-defaults", "--datadir="+n.Datadir, "--user=mysql",
			"--auth-root-authentication-method=socket", "--skip-test-db",
			"--extra-file="+filepath.Join(m.Dir, bootstrapSQL),
			"--innodb-log-file-size=48M", "--innodb-buffer-pool-size=64M",
			// Own tmpdir: parallel bootstraps sharing /tmp have clashed.
			"--tmpdir="+n.tmpdir())
		cmd.Dir = n.dir()
		cmd.Env = serverEnv()
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("mariadb-install-db for %s failed (%v): %s", n.Name, err, logSummary(logPath))
		}
		return nil
	})
}

// startAll starts every node as the topology wants and waits until the
// sandbox is healthy; pids are recorded in m as they come.
func (s *Sandbox) startAll(ctx context.Context, bins binaries, m *Manifest) error {
	record := func(i, pid int) error {
		m.Nodes[i].PID = pid
		return writeManifest(m.Dir, m)
	}
	if m.Topology == Galera {
		return s.startGalera(ctx, bins, m, record)
	}
	for i := range m.Nodes {
		pid, err := spawn(bins.mariadbd, m.Nodes[i])
		if err != nil {
			return err
		}
		if err := record(i, pid); err != nil {
			return err
		}
	}
	if err := parallel(len(m.Nodes), func(i int) error {
		return waitAnswer(ctx, m.Nodes[i], answerTimeout)
	}); err != nil {
		return err
	}
	s.log.Info("servers answer", "nodes", len(m.Nodes))
	if m.Topology != Replication {
		return nil
	}
	var replicas []Node
	for _, n := range m.Nodes {
		if n.Role == RoleReplica {
			replicas = append(replicas, n)
		}
	}
	return parallel(len(replicas), func(i int) error {
		r := replicas[i]
		primary := m.primaryOf(r)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := query(cctx, r.Socket, changeMasterSQL(primary, m.Accounts.Repl)+"; START SLAVE", 10*time.Second); err != nil {
			return fmt.Errorf("set up replication on %s: %w", r.Name, err)
		}
		return waitReplicating(ctx, r, replicatingTimeout)
	})
}

// startGalera bootstraps the cluster on node1, then starts the joiners
// together: their group handshakes overlap, and the donor serves their
// state transfers one after the other (a joiner whose request finds the
// donor busy retries every second).
func (s *Sandbox) startGalera(ctx context.Context, bins binaries, m *Manifest, record func(i, pid int) error) error {
	t0 := time.Now()
	pid, err := spawn(bins.mariadbd, m.Nodes[0], "--wsrep-new-cluster")
	if err != nil {
		return err
	}
	if err := record(0, pid); err != nil {
		return err
	}
	if err := waitAnswer(ctx, m.Nodes[0], answerTimeout); err != nil {
		return err
	}
	if err := waitSynced(ctx, m.Nodes[0], 1, answerTimeout); err != nil {
		return err
	}
	s.log.Info("galera cluster bootstrapped", "node", m.Nodes[0].Name, "took", time.Since(t0).Round(time.Millisecond))
	for i := 1; i < len(m.Nodes); i++ {
		pid, err := spawn(bins.mariadbd, m.Nodes[i])
		if err != nil {
			return err
		}
		if err := record(i, pid); err != nil {
			return err
		}
	}
	if err := parallel(len(m.Nodes)-1, func(i int) error {
		n := m.Nodes[i+1]
		if err := waitAnswer(ctx, n, galeraJoinTimeout); err != nil {
			return err
		}
		if err := waitSynced(ctx, n, 2, galeraJoinTimeout); err != nil {
			return err
		}
		s.log.Info("galera node joined", "node", n.Name, "took", time.Since(t0).Round(time.Millisecond))
		return nil
	}); err != nil {
		return err
	}
	return parallel(len(m.Nodes), func(i int) error {
		return waitSynced(ctx, m.Nodes[i], len(m.Nodes), 30*time.Second)
	})
}

// abort kills whatever Up started.
func (s *Sandbox) abort(m *Manifest) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, a := range vigilRefs(m) {
		for _, pid := range a.pids() {
			_ = killProc(ctx, pid, a.proc())
		}
	}
	_ = stopAgents(ctx, m, 0)
	for _, n := range m.Nodes {
		for _, pid := range append([]int{n.PID}, serverPIDs(n.Config)...) {
			_ = killPID(ctx, pid, n.Config)
		}
	}
	for _, a := range etcdRefs(m) {
		for _, pid := range a.pids() {
			_ = killProc(ctx, pid, a.proc())
		}
	}
	removeEtcdCgroups(m.Etcd)
	removeVigilCgroups(m.Vigils)
	removeCgroups(m.Dir, m.Nodes)
}

// parallel runs fn(0..n-1) concurrently and joins their errors.
func parallel(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// randomToken is a fresh admin token.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
