package daemon

// Online moves of a schema between the clusters behind the sharded
// listener: the plan is internal/shardmove's (decided, shown by --dry-run,
// run step by step, journaled in state_dir); the daemon gives it the
// clusters as they are now and the router: the sharded listener's hold
// and the shard map's flip. docs/shards.md.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/shardmove"
)

// moves is the one move (or cleanup) at a time and the last one.
type moves struct {
	mu      sync.Mutex
	running *shardmove.Journal
	last    *shardmove.Journal
	lastErr string
}

// MoveView is GET /api/v1/shards/move.
type MoveView struct {
	Running *shardmove.Journal `json:"running,omitempty"`
	Last    *shardmove.Journal `json:"last,omitempty"`
	Error   string             `json:"error,omitempty"`
}

// Moves is GET /api/v1/shards/move.
func (d *daemon) Moves() any {
	d.moves.mu.Lock()
	defer d.moves.mu.Unlock()
	return MoveView{Running: d.moves.running, Last: d.moves.last, Error: d.moves.lastErr}
}

// MoveShard is POST /api/v1/shards/move: a move, or with Kind cleanup the
// drop of a moved schema's source copy.
func (d *daemon) MoveShard(ctx context.Context, r admin.ShardMoveRequest) (any, error) {
	sr := d.shards
	if sr == nil {
		return nil, &admin.Error{Status: http.StatusNotFound, Message: "no sharded listener is configured (shards.listen)"}
	}
	if d.running.Load().Shards.MoveUser == "" {
		return nil, &admin.Error{Status: http.StatusConflict, Message: "moves need an account on every cluster: set shards.move_user and shards.move_password (docs/shards.md lists its privileges)"}
	}
	if d.coord != nil {
		return nil, &admin.Error{Status: http.StatusConflict, Message: "moves with several Vigil instances are not built yet: the cutover would hold the schema on this instance only (docs/shards.md)"}
	}
	d.moves.mu.Lock()
	if d.moves.running != nil {
		j := d.moves.running
		d.moves.mu.Unlock()
		return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("a %s of schema %s is running (step %d of %d): one move at a time", j.Kind, j.Schema, j.Step+1, len(j.Steps))}
	}
	d.moves.mu.Unlock()
	from := d.shardPlace(r.Schema)
	if r.Kind == "cleanup" && d.moves.last != nil && d.moves.last.Schema == r.Schema {
		from = d.moves.last.From
	}
	if from == "" {
		return nil, &admin.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("schema %s is on no cluster behind the sharded listener (or on two: name it in shards.map)", r.Schema)}
	}
	to := r.To
	if r.Kind == "cleanup" {
		if d.moves.last == nil || d.moves.last.Schema != r.Schema {
			return nil, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("no finished move of schema %s to clean up", r.Schema)}
		}
		to = d.moves.last.To
	}
	src, err := d.moveCluster(ctx, from, r.Schema)
	if err != nil {
		return nil, err
	}
	dst, err := d.moveCluster(ctx, to, r.Schema)
	if err != nil {
		return nil, err
	}
	var plan shardmove.Plan
	var j shardmove.Journal
	if r.Kind == "cleanup" {
		plan, err = shardmove.DecideCleanup(*d.moves.last, src, dst)
		j = *d.moves.last
	} else {
		plan, err = shardmove.Decide(shardmove.Request{Schema: r.Schema, From: from, To: to, DryRun: r.DryRun, Reverse: r.Reverse}, src, dst, nil)
		j = shardmove.NewJournal(plan)
	}
	if err != nil {
		return nil, &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	if r.DryRun {
		return plan, nil
	}
	if r.Kind == "cleanup" {
		j = shardmove.NewJournal(plan)
	}
	d.moves.mu.Lock()
	if d.moves.running != nil {
		d.moves.mu.Unlock()
		return nil, &admin.Error{Status: http.StatusConflict, Message: "another move started meanwhile"}
	}
	d.moves.running = &j
	d.moves.mu.Unlock()
	d.journal.add(admin.Event{Kind: "shard_move_started", Message: fmt.Sprintf("%s of schema %s from cluster %s to cluster %s started", plan.Kind, r.Schema, from, to)})
	d.wg.Go(func() { d.runMove(plan, &j) })
	return plan, nil
}

// runMove runs a plan to its end, journaling every step in state_dir.
func (d *daemon) runMove(plan shardmove.Plan, j *shardmove.Journal) {
	path := filepath.Join(d.running.Load().StateDir, "shardmove-"+plan.Request.Schema+".json")
	save := func(cur shardmove.Journal) error {
		d.moves.mu.Lock()
		c := cur
		d.moves.running = &c
		d.moves.mu.Unlock()
		return writeJSONFile(path, cur)
	}
	deps := shardmove.Deps{Dial: shardmove.Dial, Router: moveRouter{d}, Tools: shardmove.Client{TempDir: d.running.Load().StateDir}}
	err := shardmove.Run(d.ctx, plan, deps, j, save)
	d.moves.mu.Lock()
	done := *j
	d.moves.running, d.moves.last, d.moves.lastErr = nil, &done, ""
	if err != nil {
		d.moves.lastErr = err.Error()
	}
	d.moves.mu.Unlock()
	kind, msg := "shard_move_done", fmt.Sprintf("%s of schema %s from %s to %s done", plan.Kind, plan.Request.Schema, plan.Source.Name, plan.Target.Name)
	if err != nil {
		kind, msg = "shard_move_failed", fmt.Sprintf("%s of schema %s from %s to %s stopped: %v (routing: %s)", plan.Kind, plan.Request.Schema, plan.Source.Name, plan.Target.Name, err, d.shardPlace(plan.Request.Schema))
	}
	d.journal.add(admin.Event{Kind: kind, Message: msg})
}

// moveRouter is the sharded listener as a move's router (this instance).
type moveRouter struct{ d *daemon }

func (m moveRouter) Hold(ctx context.Context, schema string) (func(), error) {
	return m.d.shards.srv.Hold(ctx, []string{schema}, 5*time.Second)
}

func (m moveRouter) Flip(ctx context.Context, schema, to string) error {
	return m.d.changeShards(ctx, func(ov *shardOverlay) {
		if ov.Schemas == nil {
			ov.Schemas = map[string]string{}
		}
		ov.Schemas[schema] = to
	})
}

// shardPlace is the cluster the sharded listener routes schema to now
// ("" when none or ambiguous).
func (d *daemon) shardPlace(schema string) string {
	if d.shards == nil {
		return ""
	}
	if c, ok := d.shards.srv.Map().Schemas[schema]; ok {
		return c
	}
	for _, s := range d.shards.srv.Schemas() {
		if s.Name == schema {
			return s.Cluster
		}
	}
	return ""
}

// moveCluster is what a move needs of a cluster now: its writer, a
// readable replica, the accounts (shards.move_user runs the move; the
// replication account is the one the cluster's replicas use), its gtid_domain_id and
// whether it has the schema.
func (d *daemon) moveCluster(ctx context.Context, name, schema string) (shardmove.Cluster, error) {
	rt := d.clusterMap()[name]
	if rt == nil {
		return shardmove.Cluster{}, &admin.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no cluster %s", name)}
	}
	cc := rt.cfg.Load()
	snap := rt.topo.Load()
	if snap == nil || snap.Writer < 0 {
		return shardmove.Cluster{}, &admin.Error{Status: http.StatusConflict, Message: fmt.Sprintf("cluster %s has no writer now", name)}
	}
	server := func(addr string) (shardmove.Server, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return shardmove.Server{}, err
		}
		p, _ := strconv.Atoi(port)
		sh := d.running.Load().Shards
		return shardmove.Server{Host: host, Port: p, User: sh.MoveUser, Password: sh.MovePassword}, nil
	}
	c := shardmove.Cluster{Name: name, Repl: shardmove.Account{User: cc.Failover.ReplUser, Password: cc.Failover.ReplPassword}}
	var err error
	if c.Primary, err = server(snap.Servers[snap.Writer].Addr); err != nil {
		return c, err
	}
	for i, s := range snap.Servers {
		if i != snap.Writer && s.Readable {
			r, err := server(s.Addr)
			if err == nil {
				c.Replica = &r
				break
			}
		}
	}
	db, err := shardmove.Dial(c.Primary.Addr(), c.Primary.User, c.Primary.Password)
	if err != nil {
		return c, &admin.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("cluster %s: %v", name, err)}
	}
	defer db.Close()
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rows, err := db.Query(qctx, "SELECT @@gtid_domain_id, (SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = "+sqlString(schema)+")")
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		return c, &admin.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("cluster %s: reading gtid_domain_id: %v", name, err)}
	}
	dom, _ := strconv.ParseUint(rows[1][0], 10, 32)
	c.DomainID = uint32(dom)
	c.HasSchema = rows[1][1] != "0"
	return c, nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(s) + "'"
}
