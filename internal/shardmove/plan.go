// Package shardmove owns the online move of one schema from one
// replication cluster to another behind the sharded listener (issue 28,
// `vigil ctl shard move SCHEMA --to CLUSTER`): the decision whether a move
// may start and the plan it runs (plan.go, pure), the journal a restarted
// instance resumes from (journal.go, pure), and the executor that runs a
// plan step by step against servers, dump tools and the router reached
// through small interfaces (exec.go), with the real implementations of
// those interfaces (mariadb.go, tools.go). The daemon wires it; nothing
// here starts a goroutine that outlives a call.
package shardmove

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vigil-db/vigil/internal/frontend"
)

// Server is one MariaDB server a move talks to, with the account it logs
// in with. The password never appears in a plan, a journal or an error.
type Server struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user"`
	Password string `json:"-"`
}

// Addr is host:port.
func (s Server) Addr() string { return fmt.Sprintf("%s:%d", s.Host, s.Port) }

// Account is a user name and password (the replication account the other
// cluster's primary logs in to this cluster's primary with).
type Account struct {
	User     string `json:"user"`
	Password string `json:"-"`
}

// Cluster is what a move needs to know of a cluster: its primary, a
// replica to take the snapshot from (the primary when it has none), the
// account its primary accepts replication connections with, its
// gtid_domain_id, and whether it has the schema now.
type Cluster struct {
	Name      string  `json:"name"`
	Primary   Server  `json:"primary"`
	Replica   *Server `json:"replica,omitempty"`
	Repl      Account `json:"repl"`
	DomainID  uint32  `json:"gtid_domain_id"`
	HasSchema bool    `json:"has_schema"`
}

// snapshotServer is the server the copy dumps from: a replica, so the
// primary does not pay for the dump's long transaction.
func (c Cluster) snapshotServer() Server {
	if c.Replica != nil {
		return *c.Replica
	}
	return c.Primary
}

// Request is what the operator asked for.
type Request struct {
	Schema string `json:"schema"`
	From   string `json:"from"`
	To     string `json:"to"`
	// DryRun shows the plan and runs nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Reverse keeps a replication connection from the new cluster back to
	// the old one after the cutover, so the move can be rolled back.
	Reverse bool `json:"reverse,omitempty"`
	// ManualCutover stops the move once the target follows the source
	// (after catch-up): it waits, replicating, until the operator asks
	// for the cutover (Journal.CutoverAsked), as Vitess's MoveTables
	// waits for SwitchTraffic.
	ManualCutover bool `json:"manual_cutover,omitempty"`
}

// StepKind is one kind of step of a move. The executor has one case per
// kind.
type StepKind string

const (
	// StepCheck reads both primaries again (domains, schema presence, no
	// leftover connection) right before anything is changed.
	StepCheck StepKind = "check"
	// StepCopy dumps the schema from the source's snapshot server into
	// the target's primary and records the snapshot's GTID.
	StepCopy StepKind = "copy"
	// StepCatchUp creates the named, filtered replication connection on
	// the target's primary from the source's primary, starting at the
	// snapshot.
	StepCatchUp StepKind = "catch_up"
	// StepVerify holds the schema's writes, waits until the target has
	// applied the source, and compares CHECKSUM TABLE and COUNT(*) of
	// every table.
	StepVerify StepKind = "verify"
	// StepCutover holds the schema's writes, waits until the target has
	// applied the source (bounded), stops the connection, flips the map
	// and releases.
	StepCutover StepKind = "cutover"
	// StepReverse creates the connection from the target's primary back
	// to the source's primary, starting at the target's position at
	// cutover.
	StepReverse StepKind = "reverse"
	// StepDropSource drops the schema on the source's primary (cleanup,
	// only on the operator's word).
	StepDropSource StepKind = "drop_source"
	// StepResetConnections removes the move's replication connections
	// (cleanup).
	StepResetConnections StepKind = "reset_connections"
	// StepDropTarget stops and removes the move connection and drops the
	// target's copy (abort of a move that has not cut over: the copy
	// never served).
	StepDropTarget StepKind = "drop_target"
	// StepRollback routes a moved schema back over the reverse
	// connection: hold, wait until the old copy applied the new
	// cluster's writes, stop and remove the connection, flip back.
	StepRollback StepKind = "rollback"
)

// Step is one step of a plan: what the executor runs and what --dry-run
// shows.
type Step struct {
	Name   StepKind `json:"name"`
	Detail string   `json:"detail"`
}

// PlanKind is what a plan does.
type PlanKind string

const (
	KindMove    PlanKind = "move"
	KindCleanup PlanKind = "cleanup"
	KindAbort   PlanKind = "abort"
	// KindRollback routes a moved schema back to its old cluster.
	KindRollback PlanKind = "rollback"
)

// Plan is a move (or its cleanup, or its abort) as an ordered list of
// steps, with the clusters it runs against.
type Plan struct {
	Kind    PlanKind `json:"kind"`
	Request Request  `json:"request"`
	Source  Cluster  `json:"source"`
	Target  Cluster  `json:"target"`
	Steps   []Step   `json:"steps"`
}

// String is the plan as --dry-run prints it.
func (p Plan) String() string {
	var b strings.Builder
	if p.Kind == KindRollback {
		fmt.Fprintf(&b, "rollback of schema %s: back to %s from %s, where its move took it\n", p.Request.Schema, p.Source.Name, p.Target.Name)
	} else {
		fmt.Fprintf(&b, "%s of schema %s from %s to %s\n", p.Kind, p.Request.Schema, p.Source.Name, p.Target.Name)
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "%d. %s: %s\n", i+1, s.Name, s.Detail)
	}
	return b.String()
}

// maxConnectionName is MariaDB's limit on a replication connection name.
const maxConnectionName = 64

// MoveConnection is the name of the replication connection on the target
// that catches the copy up with the source.
func MoveConnection(schema string) string { return "vigil_move_" + schema }

// BackConnection is the name of the connection on the source that follows
// the target after the cutover (Request.Reverse).
func BackConnection(schema string) string { return "vigil_back_" + schema }

// Refusals of Decide, to tell them apart with errors.Is.
var (
	ErrSameCluster    = errors.New("source and target are the same cluster")
	ErrSameDomain     = errors.New("source and target share a gtid_domain_id")
	ErrSystemSchema   = errors.New("system schema")
	ErrNoSchema       = errors.New("schema missing on the source")
	ErrSchemaOnTarget = errors.New("schema already on the target")
	ErrMoveRunning    = errors.New("another move is running")
	ErrBadSchema      = errors.New("schema name unusable")
)

// Decide checks a move request against what is known of both clusters and
// the move in progress, if any (running may be nil), and returns the plan
// to run. It does no I/O; StepCheck repeats the checks on the servers
// right before the move changes anything.
func Decide(req Request, src, dst Cluster, running *Journal) (Plan, error) {
	if err := checkSchemaName(req.Schema); err != nil {
		return Plan{}, err
	}
	if running != nil && running.Active() {
		return Plan{}, fmt.Errorf("%w: schema %s from %s to %s is at step %d (%s); wait for it, or abort it", ErrMoveRunning,
			running.Schema, running.From, running.To, running.Step+1, running.State)
	}
	if (req.From != "" && req.From != src.Name) || (req.To != "" && req.To != dst.Name) {
		return Plan{}, fmt.Errorf("the request moves %s from %q to %q, but the clusters given are %s and %s", req.Schema, req.From, req.To, src.Name, dst.Name)
	}
	if src.Name == dst.Name {
		return Plan{}, fmt.Errorf("%w: %s", ErrSameCluster, src.Name)
	}
	if src.DomainID == dst.DomainID {
		return Plan{}, fmt.Errorf("%w: %s and %s both use gtid_domain_id %d; their transactions would meet on %s's primary "+
			"and GTID strict mode would refuse them: give each cluster its own gtid_domain_id in the my.cnf of all its servers "+
			"(and SET GLOBAL gtid_domain_id on the running ones)", ErrSameDomain, src.Name, dst.Name, src.DomainID, dst.Name)
	}
	if !src.HasSchema {
		return Plan{}, fmt.Errorf("%w: %s has no schema %s", ErrNoSchema, src.Name, req.Schema)
	}
	if dst.HasSchema {
		return Plan{}, fmt.Errorf("%w: %s already has a schema %s; drop it there first if it is a stale copy", ErrSchemaOnTarget, dst.Name, req.Schema)
	}
	req.From, req.To = src.Name, dst.Name
	conn := MoveConnection(req.Schema)
	snap := src.snapshotServer()
	steps := []Step{
		{StepCheck, fmt.Sprintf("on %s (%s) and %s (%s): gtid_domain_id %d and %d differ, binary logs on, %s has no schema %s and no connection '%s'",
			src.Name, src.Primary.Addr(), dst.Name, dst.Primary.Addr(), src.DomainID, dst.DomainID, dst.Name, req.Schema, conn)},
		{StepCopy, fmt.Sprintf("mariadb-dump --single-transaction --gtid --master-data=2 --routines --triggers --events --databases %s from %s | mariadb into %s; record the snapshot's GTID of domain %d; on failure drop %s on %s",
			req.Schema, snap.Addr(), dst.Primary.Addr(), src.DomainID, req.Schema, dst.Name)},
		{StepCatchUp, fmt.Sprintf("on %s: CHANGE MASTER '%s' TO %s (MASTER_USE_GTID=slave_pos, DO_DOMAIN_IDS=(%d)), replicate_wild_do_table='%s.%%', gtid_slave_pos domain %d at the snapshot, START SLAVE '%s'",
			dst.Primary.Addr(), conn, src.Primary.Addr(), src.DomainID, wildTableEscape(req.Schema), src.DomainID, conn)},
		{StepVerify, fmt.Sprintf("hold writes to %s; wait until %s applied %s's gtid_binlog_pos; CHECKSUM TABLE and COUNT(*) of every table equal on both; release",
			req.Schema, dst.Primary.Addr(), src.Primary.Addr())},
		{StepCutover, fmt.Sprintf("hold writes to %s on every Vigil; wait (bounded) until %s applied %s's gtid_binlog_pos; STOP SLAVE '%s'; map %s -> %s; release",
			req.Schema, dst.Primary.Addr(), src.Primary.Addr(), conn, req.Schema, dst.Name)},
	}
	if req.ManualCutover {
		steps[3].Detail = "wait, replicating, until the operator asks for the cutover (vigil ctl shard cutover " + req.Schema + "); then " + steps[3].Detail
	}
	if req.Reverse {
		steps = append(steps, Step{StepReverse, fmt.Sprintf("on %s: CHANGE MASTER '%s' TO %s (DO_DOMAIN_IDS=(%d)), filtered to %s, from %s's position at cutover; START SLAVE '%s' (rollback window)",
			src.Primary.Addr(), BackConnection(req.Schema), dst.Primary.Addr(), dst.DomainID, req.Schema, dst.Name, BackConnection(req.Schema))})
	}
	return Plan{Kind: KindMove, Request: req, Source: src, Target: dst, Steps: steps}, nil
}

// DecideCleanup is the plan that ends a finished move on the operator's
// word: it removes the move's connections and drops the old copy on the
// source. It is never run by itself.
func DecideCleanup(j Journal, src, dst Cluster) (Plan, error) {
	if j.Kind == KindRollback && j.State == StateRolledBack {
		// After a rollback the new cluster's copy is the stale one.
		req := Request{Schema: j.Schema, From: j.From, To: j.To}
		steps := []Step{{StepDropTarget, fmt.Sprintf("RESET SLAVE '%s' ALL if left, DROP DATABASE %s on %s (%s): the copy that no longer serves after the rollback",
			MoveConnection(j.Schema), quoteIdent(j.Schema), dst.Name, dst.Primary.Addr())}}
		return Plan{Kind: KindCleanup, Request: req, Source: src, Target: dst, Steps: steps}, nil
	}
	if j.State != StateDone {
		return Plan{}, fmt.Errorf("cleanup of %s: the move is %s, not done; only a move that has cut over leaves a copy to drop", j.Schema, j.State)
	}
	req := Request{Schema: j.Schema, From: j.From, To: j.To, Reverse: j.Reverse}
	reset := fmt.Sprintf("RESET SLAVE '%s' ALL on %s", MoveConnection(j.Schema), dst.Primary.Addr())
	if j.Reverse {
		reset += fmt.Sprintf("; STOP SLAVE '%s', RESET SLAVE '%s' ALL on %s", BackConnection(j.Schema), BackConnection(j.Schema), src.Primary.Addr())
	}
	steps := []Step{
		{StepResetConnections, reset},
		{StepDropSource, fmt.Sprintf("DROP DATABASE %s on %s (%s): the copy that no longer serves", quoteIdent(j.Schema), src.Name, src.Primary.Addr())},
	}
	return Plan{Kind: KindCleanup, Request: req, Source: src, Target: dst, Steps: steps}, nil
}

// DecideAbort is the plan that undoes a move that has not cut over: the
// target's copy never served, so it is dropped with the connection.
func DecideAbort(j Journal, src, dst Cluster) (Plan, error) {
	if j.CutOver() {
		return Plan{}, fmt.Errorf("abort of %s: the map already routes it to %s; move it back instead", j.Schema, j.To)
	}
	req := Request{Schema: j.Schema, From: j.From, To: j.To}
	steps := []Step{{StepDropTarget, fmt.Sprintf("STOP SLAVE '%s', RESET SLAVE '%s' ALL, DROP DATABASE IF EXISTS %s on %s (it never served)",
		MoveConnection(j.Schema), MoveConnection(j.Schema), quoteIdent(j.Schema), dst.Primary.Addr())}}
	return Plan{Kind: KindAbort, Request: req, Source: src, Target: dst, Steps: steps}, nil
}

// DecideRollback is the plan that routes a moved schema back to its old
// cluster (Vitess's ReverseTraffic): only after a move that cut over with
// Reverse and was not cleaned up, whose reverse connection has kept the
// old copy up to date.
func DecideRollback(j Journal, src, dst Cluster) (Plan, error) {
	switch {
	case j.Kind != KindMove || j.State != StateDone || !j.Flipped:
		return Plan{}, fmt.Errorf("rollback of %s: the last move is a %s that is %s; only a finished move can be rolled back", j.Schema, j.Kind, j.State)
	case !j.Reverse:
		return Plan{}, fmt.Errorf("rollback of %s: the move ran without --reverse, so the copy on %s did not get the writes made on %s since; move it back instead (vigil ctl shard move %s --to %s)",
			j.Schema, j.From, j.To, j.Schema, j.From)
	}
	req := Request{Schema: j.Schema, From: j.From, To: j.To, Reverse: true}
	steps := []Step{{StepRollback, fmt.Sprintf("hold statements on %s on every Vigil; wait (bounded) until %s (%s) applied %s's gtid_binlog_pos through '%s'; STOP SLAVE and RESET SLAVE ALL '%s'; map %s -> %s; release",
		j.Schema, src.Name, src.Primary.Addr(), dst.Primary.Addr(), BackConnection(j.Schema), BackConnection(j.Schema), j.Schema, src.Name)}}
	return Plan{Kind: KindRollback, Request: req, Source: src, Target: dst, Steps: steps}, nil
}

func checkSchemaName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrBadSchema)
	case frontend.SystemSchema(s):
		return fmt.Errorf("%w: %s exists on every server and belongs to no shard", ErrSystemSchema, s)
	case len(MoveConnection(s)) > maxConnectionName:
		return fmt.Errorf("%w: %s is too long: the replication connection %s would exceed MariaDB's %d characters",
			ErrBadSchema, s, MoveConnection(s), maxConnectionName)
	case strings.ContainsAny(s, "\x00/\\.`'"):
		// The connection name is a string and an identifier; keep it to
		// names that need no escaping in either.
		return fmt.Errorf("%w: %q has a character a replication connection name cannot carry", ErrBadSchema, s)
	}
	return nil
}
