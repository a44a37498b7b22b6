package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/frontend"
	"github.com/vigil-db/vigil/internal/qcache"
	"github.com/vigil-db/vigil/internal/qlog"
	"github.com/vigil-db/vigil/internal/qstats"
	"github.com/vigil-db/vigil/internal/rules"
	"go.yaml.in/yaml/v3"
)

// queryLog is the running query log and the config it was built from.
type queryLog struct {
	cfg    config.Log
	logger *qlog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

func qlogConfig(l config.Log) qlog.Config {
	c := qlog.Config{Statements: l.Statements, Buffer: l.Buffer, Stdout: l.Stdout}
	if f := l.File; f != nil {
		c.File = &qlog.FileConfig{Path: f.Path, MaxSize: int64(f.MaxSize), MaxAge: f.MaxAge.Duration, Keep: f.Keep}
	}
	if k := l.Kafka; k != nil {
		c.Kafka = &qlog.KafkaConfig{Brokers: k.Brokers, Topic: k.Topic, Compression: k.Compression, ClientID: k.ClientID,
			MaxBuffered: k.MaxBuffered, Linger: k.Linger.Duration}
	}
	return c
}

// sinksOf is the part of the log section that needs a new query logger
// when it changes.
func sinksOf(l config.Log) config.Log {
	return config.Log{Statements: l.Statements, Buffer: l.Buffer, File: l.File, Stdout: l.Stdout, Kafka: l.Kafka}
}

// startQueryLog opens the query log's sinks and starts its writer; nil
// when no sink is configured.
func (d *daemon) startQueryLog(ctx context.Context, l config.Log) (*queryLog, error) {
	if !l.HasQueryLog() {
		return nil, nil
	}
	lg, err := qlog.New(qlogConfig(l), d.log.With("component", "query_log"))
	if err != nil {
		return nil, fmt.Errorf("query log: %w", err)
	}
	qctx, cancel := context.WithCancel(ctx)
	q := &queryLog{cfg: sinksOf(l), logger: lg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(q.done)
		lg.Run(qctx)
	}()
	return q, nil
}

func (q *queryLog) stop() {
	if q == nil {
		return
	}
	q.logger.Close()
	q.cancel()
	<-q.done
}

// processing builds a cluster's query processing from the config; prev
// carries rule hit counters over a reload.
func (d *daemon) processing(cfg *config.Config, cc config.Cluster, slots []slot, digests *qstats.Store, prev *rules.Set) (frontend.Processing, error) {
	specs := make([]rules.Spec, 0, len(cc.Rules))
	for _, r := range cc.Rules {
		sp := rules.Spec{Name: r.Name, User: r.Match.User, Schema: r.Match.Schema, Client: r.Match.Client,
			Digest: r.Match.Digest, Query: r.Match.Query, Route: r.Route, CacheTTL: r.CacheTTL.Duration,
			Timeout: r.Timeout.Duration, Mirror: r.Mirror, Log: r.Log, Continue: r.Continue}
		if rw := r.Rewrite; rw != nil {
			sp.RewritePattern, sp.RewriteReplace = rw.Pattern, rw.Replace
		}
		if b := r.Block; b != nil {
			sp.Block = &rules.Block{Code: uint16(b.Code), SQLState: b.SQLState, Message: b.Message}
		}
		specs = append(specs, sp)
	}
	set, err := rules.Compile(specs, prev)
	if err != nil {
		return frontend.Processing{}, err
	}
	groups := map[string][]int{}
	for g, members := range cc.ServerGroups {
		for _, m := range members {
			for i, s := range slots {
				if s.Name == m && !s.Removed {
					groups[g] = append(groups[g], i)
				}
			}
		}
	}
	p := frontend.Processing{Rules: set, Groups: groups, Cache: d.cache, LogQueries: cfg.Log.Queries, LogAuth: cfg.Log.LogsAuth()}
	if cfg.Digests.On() {
		p.Digests = digests
	}
	if q := d.qlog.Load(); q != nil {
		p.Log = q.logger
	}
	return p, nil
}

// applyQueryLog replaces the query log when its sinks changed (reload).
// The old one is closed after the listeners use the new one.
func (d *daemon) applyQueryLog(ctx context.Context, l config.Log) (old *queryLog, err error) {
	cur := d.qlog.Load()
	if cur == nil && !l.HasQueryLog() {
		return nil, nil
	}
	if cur != nil && reflect.DeepEqual(cur.cfg, sinksOf(l)) {
		return nil, nil
	}
	next, err := d.startQueryLog(ctx, l)
	if err != nil {
		return nil, err
	}
	d.qlog.Store(next)
	return cur, nil
}

func newCache(cfg *config.Config) *qcache.Cache {
	return qcache.New(int64(cfg.QueryCache.MaxSize), int64(cfg.QueryCache.MaxEntrySize))
}

// KillSession implements admin.Controller.
func (d *daemon) KillSession(ctx context.Context, cluster string, id uint32, query bool) error {
	for _, name := range d.clusterNames() {
		if cluster != "" && name != cluster {
			continue
		}
		err := d.clusterMap()[name].fe.KillSession(ctx, id, query)
		if errors.Is(err, frontend.ErrNoSession) {
			continue
		}
		if err != nil {
			return &admin.Error{Status: http.StatusBadGateway, Message: err.Error()}
		}
		return nil
	}
	return &admin.Error{Status: http.StatusNotFound, Message: fmt.Sprintf("no session %d (list them with GET /api/v1/sessions)", id)}
}

// Digests implements admin.Controller.
func (d *daemon) Digests(q admin.DigestQuery) (any, error) {
	type row struct {
		Cluster string `json:"cluster"`
		qstats.Row
	}
	out := []row{}
	for _, name := range d.clusterNames() {
		if q.Cluster != "" && name != q.Cluster {
			continue
		}
		for _, r := range d.clusterMap()[name].digests.Rows(qstats.Query{ByDigest: q.By != "key", Sort: q.Sort, Limit: q.Limit,
			Digest: q.Digest, User: q.User, Schema: q.Schema}) {
			out = append(out, row{name, r})
		}
	}
	if q.Cluster != "" && d.clusterMap()[q.Cluster] == nil {
		return nil, &admin.Error{Status: http.StatusNotFound, Message: "no cluster named " + q.Cluster}
	}
	return out, nil
}

// ResetDigests implements admin.Controller.
func (d *daemon) ResetDigests(cluster string) error {
	if cluster != "" && d.clusterMap()[cluster] == nil {
		return &admin.Error{Status: http.StatusNotFound, Message: "no cluster named " + cluster}
	}
	for _, name := range d.clusterNames() {
		if cluster == "" || name == cluster {
			d.clusterMap()[name].digests.Reset()
		}
	}
	return nil
}

// Rules implements admin.Controller.
func (d *daemon) Rules() any {
	type ruleView struct {
		Cluster  string `json:"cluster"`
		Position int    `json:"position"`
		rules.Spec
		Hits uint64 `json:"hits"`
	}
	out := []ruleView{}
	for _, name := range d.clusterNames() {
		set := d.clusterMap()[name].fe.ProcessingNow().Rules
		stats := set.Stats()
		for i, sp := range set.Specs() {
			out = append(out, ruleView{Cluster: name, Position: i + 1, Spec: sp, Hits: stats[i].Hits})
		}
	}
	return out
}

// QueryCache implements admin.Controller.
func (d *daemon) QueryCache() any { return d.cache.Stats() }

// PurgeQueryCache implements admin.Controller.
func (d *daemon) PurgeQueryCache() { d.cache.Purge() }

// QueryLog implements admin.Controller.
func (d *daemon) QueryLog() any {
	q := d.qlog.Load()
	if q == nil {
		return map[string]any{"enabled": false}
	}
	return map[string]any{"enabled": true, "stats": q.logger.Stats()}
}

// RunningConfig implements admin.ConfigController: the config in force,
// secrets redacted, with the keys of the file.
func (d *daemon) RunningConfig() any {
	cfg := d.running.Load()
	if cfg == nil {
		return map[string]any{}
	}
	c := *cfg
	const redacted = "<redacted>"
	red := func(s *string) {
		if *s != "" {
			*s = redacted
		}
	}
	red(&c.Admin.Token)
	red(&c.Admin.Password)
	c.Users = append([]config.User(nil), cfg.Users...)
	for i := range c.Users {
		red(&c.Users[i].Password)
		red(&c.Users[i].BackendPassword)
	}
	c.Clusters = append([]config.Cluster(nil), cfg.Clusters...)
	for i := range c.Clusters {
		red(&c.Clusters[i].Monitor.Password)
		red(&c.Clusters[i].Failover.ReplPassword)
	}
	data, err := c.Marshal()
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		return map[string]any{"error": err.Error()}
	}
	return out
}

// ValidateConfig implements admin.ConfigController.
// A candidate is checked as a reload would check it: parsed, then
// refused if it needs a restart, then every part built (rules compiled,
// TLS files loaded, monitor and failover options validated) without
// applying anything.
func (d *daemon) ValidateConfig(data []byte) error {
	cfg, err := config.Parse(data)
	if err != nil {
		return err
	}
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	// With the overlay first, as a reload does: the running config went
	// through it, and reloadable compares like with like (a parsed
	// coordination section and a re-marshalled one differ in nil
	// versus empty lists).
	if cfg, err = d.withOverlay(cfg); err != nil {
		return err
	}
	if err := d.reloadable(cfg); err != nil {
		return err
	}
	// What the servers would be shown as does not decide validity: no
	// greetings, no dials.
	plan, err := d.build(cfg, nil)
	if err != nil {
		return err
	}
	plan.discard()
	return nil
}

// Clusters implements admin.ClusterLister.
func (d *daemon) Clusters() []admin.ClusterView {
	out := []admin.ClusterView{}
	for _, name := range d.clusterNames() {
		rt := d.clusterMap()[name]
		cc := rt.cfg.Load()
		v := admin.ClusterView{Name: name, Type: cc.Type, Listen: cc.Listen, Sessions: rt.fe.SessionCount(),
			Queries: rt.fe.Stats.Queries.Load(), Servers: []string{}}
		for _, s := range cc.Servers {
			v.Servers = append(v.Servers, s.Name)
		}
		if snap := rt.topo.Load(); snap != nil {
			v.Term = snap.Term
			if w := snap.WriterServer(); w != nil {
				v.Writer = w.Name
			} else {
				v.WriterReason = snap.WriterReason
			}
		}
		if rt.exec != nil {
			v.Operation = rt.exec.Running()
		}
		out = append(out, v)
	}
	return out
}
