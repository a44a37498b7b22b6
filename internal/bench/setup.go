package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// Setting up and tearing down the main sandbox and its proxies.

// makeWork creates the temporary directory.
func (e *env) makeWork() error {
	work, err := os.MkdirTemp("/tmp", "vigil-bench-") // short: unix socket paths
	if err != nil {
		return err
	}
	e.work = work
	// The servers run as user mysql and must reach their datadirs.
	return os.Chmod(work, 0o755)
}

// setUp creates or loads the sandbox, prepares the tables and starts the
// proxies.
func (e *env) setUp(ctx context.Context) error {
	var err error
	if e.o.SandboxDir != "" {
		e.sb, err = sandbox.Load(e.o.SandboxDir)
		if err != nil {
			return err
		}
		e.sb.SetLogger(e.o.Logger)
		e.progress("using the sandbox in %s", e.sb.Dir())
	} else {
		t0 := time.Now()
		e.progress("starting a 3-node replication sandbox in %s/sandbox", e.work)
		e.ownSB = true
		e.sb, err = sandbox.Up(ctx, sandbox.Options{
			Dir: e.sb0Dir(), Topology: sandbox.Replication, Nodes: 3, Logger: e.o.Logger,
		})
		if err != nil {
			e.keepWork = true // the servers' error logs
			return fmt.Errorf("sandbox (its files are kept in %s): %w", e.sb0Dir(), err)
		}
		e.progress("sandbox up in %s", time.Since(t0).Round(100*time.Millisecond))
	}
	if err := e.findRoles(ctx); err != nil {
		return err
	}
	e.pinServers(ctx, e.sb)
	for _, n := range e.nodes {
		db, err := e.sb.RootDB(n)
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(1)
		e.rootDBs[n] = db
	}
	if !e.o.SkipPrepare {
		if err := e.prepare(ctx); err != nil {
			return err
		}
	}
	if err := e.waitReplicas(ctx); err != nil {
		return err
	}
	if e.vigilCfg, err = e.writeVigilConfig(); err != nil {
		return err
	}
	if err := e.startVigil(ctx, e.vigilCfg); err != nil {
		return err
	}
	if err := e.startHAProxy(ctx); err != nil {
		return err
	}
	if e.o.Processing {
		if err := e.startVigilRules(ctx); err != nil {
			return err
		}
	}
	if e.o.Coordination {
		if err := e.startVigilEtcd(ctx); err != nil {
			return err
		}
	}
	if n, err := e.threadsConnected(ctx); err == nil {
		e.baselineConns = ptr(n)
	}
	return nil
}

// have failed over.
func (e *env) findRoles(ctx context.Context) error {
	if e.sb.Topology() != sandbox.Replication {
		return fmt.Errorf("the sandbox in %s is %s; vigil-bench needs replication", e.sb.Dir(), e.sb.Topology())
	}
	st, err := e.sb.Status(ctx)
	if err != nil {
		return err
	}
	for _, n := range st.Nodes {
		if !n.Running || !n.Reachable {
			return fmt.Errorf("node %s of the sandbox is not running or does not answer", n.Name)
		}
		e.nodes = append(e.nodes, n.Name)
		switch n.Role {
		case sandbox.RolePrimary:
			if e.primary != "" {
				return fmt.Errorf("two primaries in the sandbox: %s and %s", e.primary, n.Name)
			}
			e.primary = n.Name
		case sandbox.RoleReplica:
			e.replicas = append(e.replicas, n.Name)
		}
	}
	if e.primary == "" {
		return errors.New("no primary in the sandbox")
	}
	if len(e.replicas) == 0 {
		e.note("the sandbox has no replica: Vigil has nowhere to send reads")
	}
	return nil
}

// conn is how sysbench reaches addr.
func (e *env) conn(addr string) (SysbenchConn, error) {
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	if !ok || err != nil {
		return SysbenchConn{}, fmt.Errorf("bad address %q", addr)
	}
	app := e.sb.Accounts().App
	return SysbenchConn{Host: host, Port: p, User: app.User, Password: app.Password, DB: "sbtest",
		Tables: e.o.Tables, TableSize: e.o.TableSize}, nil
}

// prepare (re)creates the sysbench tables on the primary directly.
func (e *env) prepare(ctx context.Context) error {
	c, err := e.conn(e.sb.Addr(e.primary))
	if err != nil {
		return err
	}
	t0 := time.Now()
	e.progress("preparing %d sysbench tables of %d rows on %s", e.o.Tables, e.o.TableSize, e.primary)
	threads := strconv.Itoa(min(e.o.Tables, 4))
	for _, step := range []string{"cleanup", "prepare"} {
		args := append([]string{"oltp_read_write"}, c.Args()...)
		args = append(args, "--threads="+threads, step)
		out, err := runCommand(ctx, 10*time.Minute, "sysbench", args...)
		if err != nil {
			return fmt.Errorf("sysbench %s: %w\n%s", step, err, lastLines(out, 10))
		}
	}
	e.progress("tables ready in %s", time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// waitReplicas waits until every replica has applied what the primary has
// written, so all targets read the same data.
func (e *env) waitReplicas(ctx context.Context) error {
	var pos string
	if err := e.rootDBs[e.primary].QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return fmt.Errorf("%s: gtid_binlog_pos: %w", e.primary, err)
	}
	t0 := time.Now()
	for _, r := range e.replicas {
		var got sql.NullInt64
		err := e.rootDBs[r].QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 300)", pos).Scan(&got)
		if err != nil {
			return fmt.Errorf("%s: waiting for GTID %s: %w", r, pos, err)
		}
		if !got.Valid || got.Int64 != 0 {
			return fmt.Errorf("%s did not reach the primary's GTID position %s within 300s", r, pos)
		}
	}
	e.progress("replicas at the primary's GTID position %s (waited %s)", pos, time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// startVigil runs `vigil run` with the sandbox's vigil.yaml.
func (e *env) startVigil(ctx context.Context, cfgPath string) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	if len(cfg.Clusters) == 0 {
		return fmt.Errorf("%s has no cluster", e.sb.ConfigPath())
	}
	addr := cfg.Clusters[0].Listen
	if listening(addr) {
		return fmt.Errorf("something already listens on Vigil's address %s (a vigil run of this sandbox?): stop it first", addr)
	}
	bin, args := e.proxyCommand(e.o.VigilBin, "run", "--config", cfgPath)
	e.vigil, err = startChild("vigil", filepath.Join(e.work, "vigil.log"), bin, args...)
	if err != nil {
		return err
	}
	if err := e.vigil.waitListening(ctx, addr, 30*time.Second); err != nil {
		return err
	}
	if err := e.waitSQL(ctx, "vigil", addr); err != nil {
		return err
	}
	e.targets = append(e.targets,
		Target{Name: TargetDirect, Addr: e.sb.Addr(e.primary), Description: "the primary (" + e.primary + ") without a proxy"})
	e.targets = append(e.targets,
		Target{Name: TargetVigil, Addr: addr, PID: e.vigil.PID(), Description: "Vigil: reads outside transactions to the replicas, the rest to the primary",
			Admin: cfg.Admin.Listen, adminToken: cfg.Admin.Token})
	e.progress("vigil (pid %d) serves %s", e.vigil.PID(), addr)
	return nil
}

// to the primary.
func (e *env) startHAProxy(ctx context.Context) error {
	bin, err := lookProgram("haproxy")
	if err != nil {
		return err
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(e.work, "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(HAProxyConfig(addr, e.sb.Addr(e.primary), e.haproxyMaxConn)), 0o644); err != nil {
		return err
	}
	hbin, hargs := e.proxyCommand(bin, "-f", cfgPath, "-db")
	e.haproxy, err = startChild("haproxy", filepath.Join(e.work, "haproxy.log"), hbin, hargs...)
	if err != nil {
		return err
	}
	if err := e.haproxy.waitListening(ctx, addr, 15*time.Second); err != nil {
		return err
	}
	if err := e.waitSQL(ctx, "haproxy", addr); err != nil {
		return err
	}
	e.targets = append(e.targets,
		Target{Name: TargetHAProxy, Addr: addr, PID: e.haproxy.PID(), Description: "HAProxy 'mode tcp' to the primary"})
	e.progress("haproxy (pid %d) serves %s", e.haproxy.PID(), addr)
	return nil
}

// waitSQL waits until a query through addr works.
func (e *env) waitSQL(ctx context.Context, name, addr string) error {
	app := e.sb.Accounts().App
	db, err := sql.Open("mysql", sandbox.TCPDSN(addr, app.User, app.Password, "sbtest"))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		var one int
		err := db.QueryRowContext(qctx, "SELECT 1").Scan(&one)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on %s does not answer queries: %w", name, addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// not ours, and removes the temporary directory unless something in it is
// kept. It uses its own deadline: ctx may be cancelled already.
func (e *env) teardown() error {
	var errs []error
	if e.vigil != nil || e.haproxy != nil || (e.ownSB && !e.o.Keep) {
		e.progress("stopping the proxies and the sandbox")
	}
	// etcd last: the Vigil coordinated through it stops first.
	for _, c := range append(append([]*child{e.haproxy, e.vigil}, e.extra...), e.etcd) {
		if c == nil {
			continue
		}
		if err := c.stop(15 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	for _, db := range e.rootDBs {
		db.Close()
	}
	if e.out != "" && e.work != "" {
		// The proxies' logs and configurations.
		var names []string
		for _, pat := range []string{"*.log", "*.cfg", "*.yaml"} {
			m, _ := filepath.Glob(filepath.Join(e.work, pat))
			names = append(names, m...)
		}
		for _, p := range names {
			name := filepath.Base(p)
			if err := copyLog(p, filepath.Join(e.out, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				e.note("could not keep %s: %v", name, err)
			}
		}
	}
	keepWork := e.keepWork
	if e.sb != nil && e.ownSB {
		if e.o.Keep {
			keepWork = true
			e.progress("sandbox kept running in %s; tear it down with: vigil sandbox down --dir %s --purge", e.sb.Dir(), e.sb.Dir())
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			err := e.sb.Down(ctx, true)
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("sandbox down: %w", err))
				keepWork = true
			} else {
				e.progress("sandbox stopped and deleted")
			}
		}
	}
	if e.work != "" && !keepWork {
		if err := os.RemoveAll(e.work); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// last 4 MiB.
func copyLog(src, dst string) error {
	const limit = 4 << 20
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		if _, err := f.Seek(-limit, io.SeekEnd); err != nil {
			return err
		}
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, f); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
