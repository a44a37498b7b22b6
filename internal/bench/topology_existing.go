package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// Servers the bench did not create: a running sandbox (--sandbox) or the
// servers of a Vigil config (--config). Read-only checks come first; the
// only change without --vary-durability is the bench's own schema (or,
// in a sandbox, the sbtest tables every bench uses).

// benchSchema is the schema the bench creates on --config servers, and
// benchMarker the table inside that says the bench created it.
const (
	benchSchema = "vigil_bench_topology"
	benchMarker = "vigil_bench_marker"
	// The marker text keeps the old command name: schemas that earlier
	// runs left behind are still recognised as the bench's.
	benchMarkerText = "created by vigil bench topology; dropped at its end"
)

// runExistingSandbox measures the topology of a running sandbox.
func (r *topologyRunner) runExistingSandbox(ctx context.Context) (err error) {
	e := r.newEnv(r.out+"/logs-sandbox", r.o.SandboxDir)
	if e.sb, err = sandbox.Load(r.o.SandboxDir); err != nil {
		return err
	}
	e.sb.SetLogger(r.o.Logger)
	if err := e.makeWork(); err != nil {
		return err
	}
	te := &topoEnv{env: e, mayVary: r.o.VaryDurability}
	defer func() { err = errors.Join(err, te.restore(), e.teardown()) }()
	r.recordStorage(r.o.SandboxDir)
	if err := r.setUpSandbox(ctx, te); err != nil {
		return err
	}
	topo, err := r.checkServers(ctx, te)
	if err != nil {
		return err
	}
	return r.runExisting(ctx, te, topo)
}

// runExisting checks the servers, picks the variants and measures.
func (r *topologyRunner) runExisting(ctx context.Context, te *topoEnv, topo string) error {
	variants := existingVariants(topo, r.o.VaryDurability, r.o.Quick)
	if topo == TopoGalera && !r.o.VaryDurability {
		if v, err := readVariables(ctx, te.rootDBs[te.primary], "wsrep_slave_threads", "wsrep_provider_options"); err == nil {
			variants[0].SlaveThreads, _ = strconv.Atoi(v["wsrep_slave_threads"])
			fc, _ := ParseProviderOption(v["wsrep_provider_options"], "gcs.fc_limit")
			variants[0].FCLimit, _ = strconv.Atoi(fc)
		}
	}
	r.total = len(variants) * len(r.o.Workloads) * len(r.o.Threads) * len(r.o.Paths)
	plan := topologyEstimate([]topoSandbox{{Variants: variants}}, r.o)
	r.progress("plan: %s, %d variant(s), %d measured runs; ETA about %s", topo, len(variants), r.total, plan.Round(time.Second))
	return r.runVariants(ctx, te, variants)
}

// existingVariants: the servers as they are, or with --vary-durability
// the durability steps (Galera: slave threads × fc_limit).
func existingVariants(topo string, vary, quick bool) []topoVariant {
	if !vary {
		return []topoVariant{{Topology: topo, Name: "as configured", Current: true}}
	}
	if topo == TopoGalera {
		return galeraVariants(quick)
	}
	vs := durabilityVariants(quick)
	for i := range vs {
		vs[i].Topology = topo
	}
	return vs
}

// checkServers reads, without changing anything, what the servers are:
// reachable, roles, replication, semi-sync, Galera, durability. It
// records one line per server and returns the topology.
func (r *topologyRunner) checkServers(ctx context.Context, te *topoEnv) (string, error) {
	topo := TopoStandalone
	for _, n := range te.nodes {
		db := te.rootDBs[n]
		v, err := readVariables(ctx, db, "version", "read_only", "log_bin", "sync_binlog", "innodb_flush_log_at_trx_commit",
			"rpl_semi_sync_master_enabled", "rpl_semi_sync_master_timeout", "rpl_semi_sync_master_wait_point", "wsrep_on")
		if err != nil {
			return "", fmt.Errorf("%s does not answer: %w", n, err)
		}
		line := fmt.Sprintf("%s: MariaDB %s, reachable, read_only=%s, log_bin=%s, sync_binlog=%s, innodb_flush_log_at_trx_commit=%s",
			n, v["version"], v["read_only"], v["log_bin"], v["sync_binlog"], v["innodb_flush_log_at_trx_commit"])
		role := "primary"
		if n != te.primary {
			role = "not replicating now: left out of lag and catch-up"
		}
		switch {
		case isOn(v["wsrep_on"]):
			topo = TopoGalera
			st, _ := nameValues(ctx, db, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_size','wsrep_local_state_comment','wsrep_cluster_status')")
			role = fmt.Sprintf("Galera node (%s, cluster %s of %s)", st["wsrep_local_state_comment"], st["wsrep_cluster_status"], st["wsrep_cluster_size"])
		case contains(te.replicas, n):
			st, err := slaveStatus(ctx, db)
			if err != nil {
				return "", fmt.Errorf("%s: SHOW SLAVE STATUS: %w", n, err)
			}
			role = fmt.Sprintf("replica (IO %s, SQL %s, Seconds_Behind_Master %s)", st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Seconds_Behind_Master"])
			if st["Slave_IO_Running"] != "Yes" || st["Slave_SQL_Running"] != "Yes" {
				r.note("%s does not replicate: lag and catch-up mean nothing for it", n)
			}
		case n == te.primary && te.kind == "replication":
			topo = TopoAsync
			if isOn(v["rpl_semi_sync_master_enabled"]) {
				topo = TopoSemiSync
				te.semiTimeoutMs, _ = strconv.Atoi(v["rpl_semi_sync_master_timeout"])
				role += fmt.Sprintf(", semi-sync %s (timeout %s ms)", v["rpl_semi_sync_master_wait_point"], v["rpl_semi_sync_master_timeout"])
			} else {
				role += ", async replication"
			}
		}
		line += "; " + role
		r.res.Checks = append(r.res.Checks, line)
		r.progress("check: %s", line)
	}
	if topo == TopoGalera && te.kind != "galera" {
		te.kind = "galera"
	}
	if topo != TopoGalera && te.vigil != nil && !r.o.VaryDurability {
		r.progress("check: nothing will be changed on the servers but the bench's tables (no --vary-durability)")
	}
	return topo, nil
}

// runConfigServers measures the servers of one cluster of a Vigil config.
func (r *topologyRunner) runConfigServers(ctx context.Context) (err error) {
	cfg, err := config.Load(r.o.ConfigPath)
	if err != nil {
		return err
	}
	cl, err := pickCluster(cfg, r.o.Cluster)
	if err != nil {
		return err
	}
	user, err := backendUser(cfg)
	if err != nil {
		return err
	}
	e := r.newEnv("", "")
	te := &topoEnv{env: e, mayVary: r.o.VaryDurability, kind: cl.Type}
	setDBs := map[string]*sql.DB{}
	defer func() {
		for _, db := range setDBs {
			db.Close()
		}
	}()
	defer func() { err = errors.Join(err, te.restore(), e.teardown()) }()
	for _, s := range cl.Servers {
		db, err := sql.Open("mysql", sandbox.TCPDSN(s.Address, cl.Monitor.User, cl.Monitor.Password, ""))
		if err != nil {
			return err
		}
		db.SetMaxOpenConns(2)
		e.rootDBs[s.Name] = db
		e.nodes = append(e.nodes, s.Name)
		app, err := sql.Open("mysql", sandbox.TCPDSN(s.Address, user.backend, user.backendPass, ""))
		if err != nil {
			return err
		}
		app.SetMaxOpenConns(1)
		setDBs[s.Name] = app
	}
	if err := findConfigRoles(ctx, te, cl); err != nil {
		return err
	}
	r.dropStoppedReplicas(ctx, te)
	if r.o.VaryDurability {
		te.setDBs = setDBs
	}
	addr := ""
	for _, s := range cl.Servers {
		if s.Name == te.primary {
			addr = s.Address
		}
	}
	if te.direct, err = sysbenchConnFor(addr, user.backend, user.backendPass, r.o); err != nil {
		return err
	}
	if r.o.VigilAddr != "" {
		c, err := sysbenchConnFor(r.o.VigilAddr, user.name, user.pass, r.o)
		if err != nil {
			return err
		}
		te.vigil = &c
	} else if contains(r.o.Paths, PathVigil) {
		r.note("no --vigil HOST:PORT: the runs go direct to %s only", te.primary)
	}
	topo, err := r.checkServers(ctx, te)
	if err != nil {
		return err
	}
	if err := checkCreate(ctx, r, setDBs[te.primary], user.backend); err != nil {
		return err
	}
	if err := claimSchema(ctx, setDBs[te.primary]); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, derr := setDBs[te.primary].ExecContext(dctx, "DROP DATABASE "+benchSchema); derr != nil {
			err = errors.Join(err, fmt.Errorf("dropping %s: %w", benchSchema, derr))
		} else {
			r.progress("dropped schema %s", benchSchema)
		}
	}()
	if err := prepareTables(ctx, te.direct); err != nil {
		return err
	}
	if _, err := te.settle(ctx); err != nil {
		return err
	}
	return r.runExisting(ctx, te, topo)
}

func pickCluster(cfg *config.Config, name string) (config.Cluster, error) {
	var names []string
	for _, c := range cfg.Clusters {
		if c.Name == name || (name == "" && len(cfg.Clusters) == 1) {
			return c, nil
		}
		names = append(names, c.Name)
	}
	if name == "" {
		return config.Cluster{}, fmt.Errorf("the config has %d clusters (%s): name one with --cluster", len(names), strings.Join(names, ", "))
	}
	return config.Cluster{}, fmt.Errorf("no cluster %q in the config (it has %s)", name, strings.Join(names, ", "))
}

// configUser is the account sysbench logs in with: name and password
// through Vigil, the backend ones to the servers.
type configUser struct{ name, pass, backend, backendPass string }

func backendUser(cfg *config.Config) (configUser, error) {
	for _, u := range cfg.Users {
		if strings.HasPrefix(u.Password, "*") && len(u.Password) == 41 {
			continue // a hash: sysbench needs the password
		}
		cu := configUser{name: u.Name, pass: u.Password, backend: u.Name, backendPass: u.Password}
		if u.BackendUser != "" {
			cu.backend, cu.backendPass = u.BackendUser, u.BackendPassword
		}
		return cu, nil
	}
	return configUser{}, errors.New("the config has no user with a plaintext password: sysbench needs one to log in")
}

func sysbenchConnFor(addr, user, pass string, o TopologyOptions) (SysbenchConn, error) {
	host, port, ok := strings.Cut(addr, ":")
	p, err := strconv.Atoi(port)
	if !ok || err != nil {
		return SysbenchConn{}, fmt.Errorf("bad address %q: want HOST:PORT", addr)
	}
	return SysbenchConn{Host: host, Port: p, User: user, Password: pass, DB: benchSchema, Tables: o.Tables, TableSize: o.TableSize}, nil
}

// findConfigRoles: Galera (the first synced node takes the writes),
// replication (the one writable server not replicating; the replicating
// ones), or a lone server.
func findConfigRoles(ctx context.Context, te *topoEnv, cl config.Cluster) error {
	for _, n := range te.nodes {
		db := te.rootDBs[n]
		v, err := readVariables(ctx, db, "read_only", "wsrep_on")
		if err != nil {
			return fmt.Errorf("%s does not answer: %w", n, err)
		}
		if isOn(v["wsrep_on"]) {
			te.kind = "galera"
			if te.primary == "" {
				te.primary = n
			}
			continue
		}
		if _, err := slaveStatus(ctx, db); err == nil {
			te.replicas = append(te.replicas, n)
			continue
		}
		if !isOn(v["read_only"]) {
			if te.primary != "" && te.kind != "galera" {
				return fmt.Errorf("two writable servers that do not replicate: %s and %s", te.primary, n)
			}
			te.primary = n
		}
	}
	if te.primary == "" {
		return fmt.Errorf("no primary among %s: every server is read-only or replicating", strings.Join(te.nodes, ", "))
	}
	if te.kind != "galera" {
		te.kind = "replication"
		if len(te.replicas) == 0 {
			te.kind = "standalone"
		}
	}
	return nil
}

// checkCreate reads the bench user's grants: it needs CREATE on the
// bench schema.
func checkCreate(ctx context.Context, r *topologyRunner, db *sql.DB, user string) error {
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return fmt.Errorf("%s cannot log in to the primary or read its grants: %w", user, err)
	}
	defer rows.Close()
	var grants []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return err
		}
		grants = append(grants, g)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !GrantsAllowCreate(grants, benchSchema) {
		return fmt.Errorf("%s lacks CREATE on %s.* (its grants: %s): GRANT ALL ON %s.* TO it first", user, benchSchema, strings.Join(grants, "; "), benchSchema)
	}
	r.progress("check: %s may create schema %s", user, benchSchema)
	return nil
}

// GrantsAllowCreate reports whether SHOW GRANTS lines give CREATE (or
// ALL) on *.* or on schema.*.
func GrantsAllowCreate(grants []string, schema string) bool {
	for _, g := range grants {
		up := strings.ToUpper(g)
		on := strings.Index(up, " ON ")
		if !strings.HasPrefix(up, "GRANT ") || on < 0 {
			continue
		}
		privs := up[len("GRANT "):on]
		target := strings.Fields(g[on+4:])
		if len(target) == 0 {
			continue
		}
		obj := strings.ReplaceAll(target[0], "`", "")
		if obj != "*.*" && !strings.EqualFold(obj, schema+".*") {
			continue
		}
		if strings.Contains(privs, "ALL PRIVILEGES") {
			return true
		}
		for _, p := range strings.Split(privs, ",") {
			if strings.TrimSpace(p) == "CREATE" {
				return true
			}
		}
	}
	return false
}

// claimSchema creates the bench schema with its marker, or accepts an
// existing one only if it has the marker.
func claimSchema(ctx context.Context, db *sql.DB) error {
	var name string
	err := db.QueryRowContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", benchSchema).Scan(&name)
	switch {
	case err == nil:
		var note string
		if err := db.QueryRowContext(ctx, "SELECT note FROM "+benchSchema+"."+benchMarker+" LIMIT 1").Scan(&note); err != nil || note != benchMarkerText {
			return fmt.Errorf("a schema %s exists without the bench's marker table %s: it is not the bench's, so it is neither used nor dropped (drop or rename it yourself)", benchSchema, benchMarker)
		}
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	for _, q := range []string{
		"CREATE DATABASE " + benchSchema,
		"CREATE TABLE " + benchSchema + "." + benchMarker + " (note VARCHAR(200) NOT NULL, created TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
		"INSERT INTO " + benchSchema + "." + benchMarker + " (note) VALUES ('" + benchMarkerText + "')",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// prepareTables creates the sysbench tables in c.DB (dropping earlier
// ones of the bench there).
func prepareTables(ctx context.Context, c SysbenchConn) error {
	for _, step := range []string{"cleanup", "prepare"} {
		args := append(append([]string{"oltp_insert"}, c.Args()...), "--threads=1", step)
		if out, err := runCommand(ctx, 10*time.Minute, "sysbench", args...); err != nil {
			return fmt.Errorf("sysbench %s in %s: %w\n%s", step, c.DB, err, lastLines(out, 10))
		}
	}
	return nil
}
