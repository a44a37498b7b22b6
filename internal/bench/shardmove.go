package bench

// The move half of `vigil-bench shards`: a big tenant moved between the
// two clusters under load (throughput against the dump+load alone, the
// holds, the other tenants' qps during the move), and the cutover hold
// over several moves of a small tenant written without pause.

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/sandbox"
	"github.com/vigil-db/vigil/internal/shardmove"
)

const (
	bigTenant   = "bench_big"
	smallTenant = "bench_small"
)

// ShardMoveResults are the move half's numbers.
type ShardMoveResults struct {
	// SizeMB is the big tenant's InnoDB data and index size.
	SizeMB float64 `json:"size_mb"`
	// DumpLoadSeconds is mariadb-dump | mariadb alone (the copy step's
	// tool, no move), from the same replica into the same target.
	DumpLoadSeconds float64 `json:"dump_load_seconds"`
	DumpLoadMBps    float64 `json:"dump_load_mb_per_s"`
	// MoveSeconds is the whole move (request to done) under load;
	// CopySeconds its copy step.
	MoveSeconds float64 `json:"move_seconds"`
	CopySeconds float64 `json:"copy_seconds"`
	MoveMBps    float64 `json:"move_mb_per_s"`
	// Ratio is MoveMBps / DumpLoadMBps.
	Ratio          float64 `json:"move_vs_dump_load"`
	VerifyHeldMs   float64 `json:"verify_held_ms"`
	CutoverHeldMs  float64 `json:"cutover_held_ms"`
	VerifyDetail   string  `json:"verify_detail"`
	CutoverDetail  string  `json:"cutover_detail"`
	OtherQPSBefore *Stat   `json:"other_tenant_qps_before"`
	OtherQPSDuring *Stat   `json:"other_tenant_qps_during"`
	// Writer on the moved tenant through the sharded listener.
	WriterAcked   int `json:"writer_acked"`
	WriterErrors  int `json:"writer_errors"`
	WriterMissing int `json:"writer_missing_on_target"`
	// Holds: the cutover hold (ms) of each move of the small tenant.
	Holds        []float64 `json:"small_cutover_held_ms"`
	HoldStat     *Stat     `json:"small_cutover_held"`
	SmallErrors  int       `json:"small_writer_errors"`
	SmallMissing int       `json:"small_writer_missing"`
}

// keyWriter inserts unique keys into tenant's table w through addr and
// remembers the acknowledged ones.
type keyWriter struct {
	mu    sync.Mutex
	acked []int
	errs  int
	stop  func()
}

func startKeyWriter(addr, user, password, tenant string) (*keyWriter, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", addr, tenant
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 5*time.Second, 30*time.Second, 30*time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	w := &keyWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer db.Close()
		for k := 1; ctx.Err() == nil; k++ {
			// Not ctx: a statement cancelled by stop may still commit.
			_, err := db.Exec("INSERT INTO w (k) VALUES (?)", k)
			w.mu.Lock()
			if err == nil {
				w.acked = append(w.acked, k)
			} else {
				w.errs++
			}
			w.mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	w.stop = func() { cancel(); <-done }
	return w, nil
}

// missingOn stops the writer and counts its acknowledged keys that node
// lacks.
func (w *keyWriter) missingOn(ctx context.Context, sb *sandbox.Sandbox, node, tenant string) (acked, errs, missing int, err error) {
	w.stop()
	rows, err := sb.SQL(ctx, node, "SELECT k FROM "+tenant+".w")
	if err != nil {
		return 0, 0, 0, err
	}
	have := make(map[int]bool, len(rows))
	for _, r := range rows {
		k, _ := strconv.Atoi(r[0])
		have[k] = true
	}
	for _, k := range w.acked {
		if !have[k] {
			missing++
		}
	}
	return len(w.acked), w.errs, missing, nil
}

// qpsMeter runs point selects on the other tenant through the sharded
// listener and counts them per second.
type qpsMeter struct {
	mu      sync.Mutex
	buckets map[int64]int
	stop    func()
}

func startQPSMeter(addr, user, password string, threads, rows int) (*qpsMeter, error) {
	db, err := sql.Open("mysql", sandbox.TCPDSN(addr, user, password, shardsTenant))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(threads)
	m := &qpsMeter{buckets: map[int64]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range threads {
		wg.Go(func() {
			var c string
			for n := i; ctx.Err() == nil; n += threads {
				if err := db.QueryRowContext(ctx, "SELECT c FROM sbtest1 WHERE id = ?", 1+n%rows).Scan(&c); err != nil {
					continue
				}
				s := time.Now().Unix()
				m.mu.Lock()
				m.buckets[s]++
				m.mu.Unlock()
			}
		})
	}
	m.stop = func() { cancel(); wg.Wait(); db.Close() }
	return m, nil
}

// between is the per-second qps of the whole seconds in [from, to).
func (m *qpsMeter) between(from, to time.Time) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []float64
	for s := from.Unix() + 1; s < to.Unix(); s++ {
		out = append(out, float64(m.buckets[s]))
	}
	return out
}

var heldRe = regexp.MustCompile(`writes held ([0-9.]+[mµn]?s)`)

func heldMs(detail string) float64 {
	m := heldRe.FindStringSubmatch(detail)
	if m == nil {
		return -1
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		return -1
	}
	return float64(d) / float64(time.Millisecond)
}

// move runs one move (or cleanup) through the admin API and waits for its
// end; it returns the journal and how long it took.
func (e *shardsEnv) move(ctx context.Context, api adminAPI, req admin.ShardMoveRequest) (*shardmove.Journal, time.Duration, error) {
	t0 := time.Now()
	if err := api.do(ctx, "POST", "/api/v1/shards/move", req, nil); err != nil {
		return nil, 0, err
	}
	var j *shardmove.Journal
	err := waitFor(ctx, 30*time.Minute, fmt.Sprintf("the %s of %s", orMove(req.Kind), req.Schema), func() error {
		var v struct {
			Running *shardmove.Journal `json:"running"`
			Last    *shardmove.Journal `json:"last"`
			Error   string             `json:"error"`
		}
		if err := api.do(ctx, "GET", "/api/v1/shards/move", nil, &v); err != nil {
			return err
		}
		if v.Running != nil || v.Last == nil || v.Last.Schema != req.Schema {
			return fmt.Errorf("running")
		}
		j = v.Last
		return nil
	})
	took := time.Since(t0)
	if err != nil {
		return nil, took, err
	}
	switch j.State {
	case shardmove.StateDone, shardmove.StateCleaned:
		return j, took, nil
	}
	return j, took, fmt.Errorf("the %s of %s ended %s: %s", orMove(req.Kind), req.Schema, j.State, j.Error)
}

func orMove(kind string) string {
	if kind == "" {
		return "move"
	}
	return kind
}

func resultOf(j *shardmove.Journal, step shardmove.StepKind) *shardmove.StepResult {
	for i := len(j.Results) - 1; i >= 0; i-- {
		if j.Results[i].Name == step && !j.Results[i].Finished.IsZero() {
			return &j.Results[i]
		}
	}
	return nil
}

// moveServer is a sandbox node as a move's server, with the app account.
func (e *shardsEnv) moveServer(node string) (shardmove.Server, error) {
	n, err := e.sb.Node(node)
	if err != nil {
		return shardmove.Server{}, err
	}
	app := e.sb.Accounts().App
	return shardmove.Server{Host: sandbox.Host, Port: n.Port, User: app.User, Password: app.Password}, nil
}

// waitReplicas waits until the cluster's replicas applied its primary's
// binary log.
func (e *shardsEnv) waitReplicas(ctx context.Context, c sandbox.Cluster) error {
	rows, err := e.sb.SQL(ctx, c.Nodes[0], "SELECT @@gtid_binlog_pos")
	if err != nil {
		return err
	}
	for _, n := range c.Nodes[1:] {
		r, err := e.sb.SQL(ctx, n, "SELECT MASTER_GTID_WAIT('"+rows[0][0]+"', 1800)")
		if err != nil {
			return err
		}
		if r[0][0] != "0" {
			return fmt.Errorf("%s did not apply %s", n, rows[0][0])
		}
	}
	return nil
}

// waitTenant waits until the sharded listener finds tenant (its next look
// at the clusters).
func (e *shardsEnv) waitTenant(ctx context.Context, tenant string) error {
	app := e.sb.Accounts().App
	return waitFor(ctx, time.Minute, tenant+" found by the sharded listener", func() error {
		db, err := sql.Open("mysql", sandbox.TCPDSN(e.cfg.Shards.Listen, app.User, app.Password, tenant))
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, "SELECT COUNT(*) FROM w")
		return err
	})
}

// runMoves is the move half: the big tenant, then the small one's holds.
func (e *shardsEnv) runMoves(ctx context.Context) error {
	o := e.o
	res := &ShardMoveResults{}
	e.res.Moves = res
	clusters := e.sb.Clusters()
	src, dst := clusters[0], clusters[1]
	api := adminAPI{addr: e.cfg.Admin.Listen, token: e.cfg.Admin.Token}
	app := e.sb.Accounts().App

	// The big tenant: rows of about 1 KiB.
	rows := o.MoveMB * 1024 * 1024 / 1100
	e.progress("creating %s of about %d MB (%d rows) on %s", bigTenant, o.MoveMB, rows, src.Name)
	if err := e.sb.Exec(ctx, src.Nodes[0], "CREATE DATABASE "+bigTenant,
		"CREATE TABLE "+bigTenant+".t (id INT PRIMARY KEY, pad VARCHAR(1000) NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE "+bigTenant+".w (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL) ENGINE=InnoDB"); err != nil {
		return err
	}
	const batch = 20000
	for from := 1; from <= rows; from += batch {
		to := min(from+batch-1, rows)
		if err := e.sb.Exec(ctx, src.Nodes[0], fmt.Sprintf("INSERT INTO %s.t SELECT seq, RPAD(SHA2(seq, 256), 1000, 'x') FROM %s.seq_%d_to_%d", bigTenant, bigTenant, from, to)); err != nil {
			return err
		}
	}
	if err := e.waitReplicas(ctx, src); err != nil {
		return err
	}
	// Fresh statistics: information_schema's sizes lag the inserts.
	if err := e.sb.Exec(ctx, src.Nodes[0], "ANALYZE TABLE "+bigTenant+".t"); err != nil {
		return err
	}
	size, err := e.sb.SQL(ctx, src.Nodes[0], "SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE table_schema = '"+bigTenant+"'")
	if err != nil {
		return err
	}
	bytes, _ := strconv.ParseFloat(size[0][0], 64)
	res.SizeMB = bytes / (1 << 20)

	// The dump+load alone, from the replica a move dumps from into the
	// target's primary, then dropped there.
	from, err := e.moveServer(src.Nodes[len(src.Nodes)-1])
	if err != nil {
		return err
	}
	to, err := e.moveServer(dst.Nodes[0])
	if err != nil {
		return err
	}
	e.progress("dump+load alone: %.0f MB from %s into %s", res.SizeMB, src.Nodes[len(src.Nodes)-1], dst.Nodes[0])
	t0 := time.Now()
	if _, err := (shardmove.Client{TempDir: e.work}).DumpLoad(ctx, from, to, bigTenant); err != nil {
		return fmt.Errorf("dump+load alone: %w", err)
	}
	res.DumpLoadSeconds = time.Since(t0).Seconds()
	res.DumpLoadMBps = res.SizeMB / res.DumpLoadSeconds
	if err := e.sb.Exec(ctx, dst.Nodes[0], "DROP DATABASE "+bigTenant); err != nil {
		return err
	}
	if err := e.waitReplicas(ctx, dst); err != nil {
		return err
	}
	e.progress("dump+load alone: %.1f s, %.1f MB/s", res.DumpLoadSeconds, res.DumpLoadMBps)

	// The move under load: the other tenant read through the sharded
	// listener, the moved one written through it.
	if err := e.waitTenant(ctx, bigTenant); err != nil {
		return err
	}
	meter, err := startQPSMeter(e.cfg.Shards.Listen, app.User, app.Password, 4, o.TableSize)
	if err != nil {
		return err
	}
	defer meter.stop()
	w, err := startKeyWriter(e.cfg.Shards.Listen, app.User, app.Password, bigTenant)
	if err != nil {
		return err
	}
	before := time.Now()
	e.progress("the other tenant's qps for 15 s before the move")
	if sleepCtx(ctx, 15*time.Second); ctx.Err() != nil {
		w.stop()
		return ctx.Err()
	}
	moveStart := time.Now()
	e.progress("moving %s (%.0f MB) from %s to %s under load", bigTenant, res.SizeMB, src.Name, dst.Name)
	j, took, err := e.move(ctx, api, admin.ShardMoveRequest{Schema: bigTenant, To: dst.Name})
	moveEnd := time.Now()
	if err != nil {
		w.stop()
		return err
	}
	meter.stop()
	res.OtherQPSBefore = NewStat(meter.between(before, moveStart))
	res.OtherQPSDuring = NewStat(meter.between(moveStart, moveEnd))
	res.MoveSeconds = took.Seconds()
	res.MoveMBps = res.SizeMB / res.MoveSeconds
	res.Ratio = res.MoveMBps / res.DumpLoadMBps
	if r := resultOf(j, shardmove.StepCopy); r != nil {
		res.CopySeconds = r.Finished.Sub(r.Started).Seconds()
	}
	if r := resultOf(j, shardmove.StepVerify); r != nil {
		res.VerifyDetail, res.VerifyHeldMs = r.Detail, heldMs(r.Detail)
	}
	if r := resultOf(j, shardmove.StepCutover); r != nil {
		res.CutoverDetail, res.CutoverHeldMs = r.Detail, heldMs(r.Detail)
	}
	if sleepCtx(ctx, 2*time.Second); ctx.Err() != nil { // writes on the target
		w.stop()
		return ctx.Err()
	}
	if res.WriterAcked, res.WriterErrors, res.WriterMissing, err = w.missingOn(ctx, e.sb, dst.Nodes[0], bigTenant); err != nil {
		return err
	}
	e.progress("moved in %.1f s (copy %.1f s), %.1f MB/s = %.2f of the dump+load alone; writes held %.0f ms (verify), %.0f ms (cutover); writer %d acked, %d errors, %d missing",
		res.MoveSeconds, res.CopySeconds, res.MoveMBps, res.Ratio, res.VerifyHeldMs, res.CutoverHeldMs, res.WriterAcked, res.WriterErrors, res.WriterMissing)
	if _, _, err := e.move(ctx, api, admin.ShardMoveRequest{Schema: bigTenant, Kind: "cleanup"}); err != nil {
		return err
	}
	return e.smallMoves(ctx, api, src, dst, res)
}

// smallMoves moves a small tenant, written without pause, back and forth
// o.Moves times (cleaning up after each) and records each cutover's hold.
func (e *shardsEnv) smallMoves(ctx context.Context, api adminAPI, src, dst sandbox.Cluster, res *ShardMoveResults) error {
	app := e.sb.Accounts().App
	if err := e.sb.Exec(ctx, src.Nodes[0], "CREATE DATABASE "+smallTenant,
		"CREATE TABLE "+smallTenant+".t (id INT PRIMARY KEY, pad VARCHAR(200) NOT NULL)",
		"INSERT INTO "+smallTenant+".t SELECT seq, REPEAT('s', 200) FROM "+smallTenant+".seq_1_to_5000",
		"CREATE TABLE "+smallTenant+".w (id BIGINT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL)"); err != nil {
		return err
	}
	if err := e.waitReplicas(ctx, src); err != nil {
		return err
	}
	if err := e.waitTenant(ctx, smallTenant); err != nil {
		return err
	}
	w, err := startKeyWriter(e.cfg.Shards.Listen, app.User, app.Password, smallTenant)
	if err != nil {
		return err
	}
	at, other := src, dst
	for i := 1; i <= e.o.Moves; i++ {
		if sleepCtx(ctx, time.Second); ctx.Err() != nil {
			w.stop()
			return ctx.Err()
		}
		j, _, err := e.move(ctx, api, admin.ShardMoveRequest{Schema: smallTenant, To: other.Name})
		if err != nil {
			w.stop()
			return err
		}
		if r := resultOf(j, shardmove.StepCutover); r != nil {
			res.Holds = append(res.Holds, heldMs(r.Detail))
			e.progress("[move %d] %s -> %s: %s", i, at.Name, other.Name, r.Detail)
		}
		if _, _, err := e.move(ctx, api, admin.ShardMoveRequest{Schema: smallTenant, Kind: "cleanup"}); err != nil {
			w.stop()
			return err
		}
		at, other = other, at
	}
	if sleepCtx(ctx, time.Second); ctx.Err() != nil {
		w.stop()
		return ctx.Err()
	}
	var acked int
	if acked, res.SmallErrors, res.SmallMissing, err = w.missingOn(ctx, e.sb, at.Nodes[0], smallTenant); err != nil {
		return err
	}
	res.HoldStat = NewStat(res.Holds)
	e.progress("%d moves of %s: cutover hold %s ms; writer %d acked, %d errors, %d missing", len(res.Holds), smallTenant, statText(res.HoldStat), acked, res.SmallErrors, res.SmallMissing)
	return nil
}
