package daemon

// The sharded listener's runtime: its listener, the shard map it routes
// by (the config's map and states, with what was set at run time on top:
// shard states, and later the flips of moves), kept in etcd when
// coordinated (every instance routes by the same version) and in
// state_dir/shards.json when alone. docs/shards.md.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/coord"
	"github.com/vigil-db/vigil/internal/frontend"
)

// shardOverlay is what was set at run time over the config's map.
type shardOverlay struct {
	Schemas map[string]string `json:"schemas,omitempty"`
	States  map[string]string `json:"states,omitempty"`
	// Hold is a move's hold of a schema on every instance (coordinated
	// moves only; shardhold.go).
	Hold *shardHoldSpec `json:"hold,omitempty"`
}

// shardRuntime is the sharded listener while one is configured.
type shardRuntime struct {
	srv *frontend.ShardServer

	mu       sync.Mutex
	ln       net.Listener
	cfg      config.Shards
	clusters []string
	overlay  shardOverlay
	// version: the overlay's etcd revision when coordinated; else a
	// count of the maps published.
	version uint64
	coord   bool

	// holdMu guards held: this instance's part of a coordinated move's
	// hold (shardhold.go).
	holdMu  sync.Mutex
	held    *localHold
	expired string
}

// startShards starts the sharded listener when cfg has one.
func (d *daemon) startShards(ctx context.Context, cfg *config.Config) error {
	if !cfg.Shards.Enabled() {
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Shards.Listen)
	if err != nil {
		return fmt.Errorf("shards: listen on %s: %w", cfg.Shards.Listen, err)
	}
	sr := &shardRuntime{srv: frontend.NewShardServer(d.log.With("listener", "shards")), ln: ln, coord: d.coord != nil}
	if d.coord == nil {
		if err := readJSONFile(shardsPath(cfg.StateDir), &sr.overlay); err != nil {
			ln.Close()
			return fmt.Errorf("shards: %w", err)
		}
	}
	d.shards = sr
	d.shardClusters()
	sr.configure(cfg)
	d.wg.Go(func() {
		if err := sr.srv.Serve(ctx, ln); err != nil {
			d.log.Error("sharded listener stopped", "err", err)
		}
	})
	if d.coord != nil {
		d.wg.Go(func() { d.coord.WatchShards(ctx, sr.applyStored(d)) })
		d.wg.Go(func() { d.watchMoves(ctx) })
	} else {
		d.wg.Go(func() { d.resumeMoves(ctx) })
	}
	d.log.Info("sharded listener listening", "listen", ln.Addr().String(), "clusters", cfg.ShardClusters())
	return nil
}

// applyStored is the etcd watch's callback: a new version of the
// overlay.
func (sr *shardRuntime) applyStored(d *daemon) func(version int64, data []byte) {
	return func(version int64, data []byte) {
		var ov shardOverlay
		if err := json.Unmarshal(data, &ov); err != nil {
			d.log.Error("the shard map in etcd is not valid JSON; keeping the last one", "err", err)
			return
		}
		sr.mu.Lock()
		if uint64(version) < sr.version {
			sr.mu.Unlock()
			return
		}
		sr.overlay, sr.version = ov, uint64(version)
		sr.publishLocked(true)
		sr.mu.Unlock()
		// After the map: a hold that ends releases its statements to
		// where this version routes them.
		sr.syncHold(d, ov.Hold)
	}
}

// configure applies the shards section (start and reload).
func (sr *shardRuntime) configure(cfg *config.Config) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	sr.cfg = cfg.Shards
	sr.clusters = cfg.ShardClusters()
	sr.srv.SetDiscoverInterval(cfg.Shards.DiscoverInterval.Duration)
	sr.publishLocked(false)
}

// publishLocked publishes the map made of the config and the overlay;
// stored: the version is etcd's, else a new local one.
func (sr *shardRuntime) publishLocked(stored bool) {
	if !stored && !sr.coordinated() {
		sr.version++
	}
	m := &frontend.ShardMap{Version: sr.version, Clusters: slices.Clone(sr.clusters),
		Schemas: map[string]string{}, States: map[string]frontend.ShardState{}}
	maps.Copy(m.Schemas, sr.cfg.Map)
	maps.Copy(m.Schemas, sr.overlay.Schemas)
	states := maps.Clone(sr.cfg.States)
	if states == nil {
		states = map[string]string{}
	}
	maps.Copy(states, sr.overlay.States)
	for schema, s := range states {
		if st, ok := frontend.ParseShardState(s); ok && st != frontend.ShardOnline {
			m.States[schema] = st
		}
	}
	sr.srv.SetMap(m)
}

// coordinated: the map's version is etcd's.
func (sr *shardRuntime) coordinated() bool { return sr.coord }

// shardClusters gives the sharded listener the clusters' listeners
// (start and after every reload).
func (d *daemon) shardClusters() {
	if d.shards == nil {
		return
	}
	m := map[string]*frontend.Server{}
	for name, rt := range d.clusterMap() {
		m[name] = rt.fe
	}
	d.shards.srv.SetClusters(m)
}

// prepareShards opens a reload's new sharded listen address before the
// swap (nil when it does not change): a reload that cannot listen is
// refused whole.
func (d *daemon) prepareShards(cfg *config.Config) (net.Listener, error) {
	if !cfg.Shards.Enabled() {
		return nil, nil
	}
	if d.shards != nil && d.shards.cfg.Listen == cfg.Shards.Listen {
		return nil, nil
	}
	ln, err := net.Listen("tcp", cfg.Shards.Listen)
	if err != nil {
		return nil, fmt.Errorf("shards: listen on %s: %w", cfg.Shards.Listen, err)
	}
	return ln, nil
}

// applyShards swaps a reload's shards section in. ln: the new listen
// address's listener from prepareShards.
func (d *daemon) applyShards(cfg *config.Config, ln net.Listener) {
	sr := d.shards
	switch {
	case sr == nil && cfg.Shards.Enabled():
		ln.Close() // startShards listens again on the same address
		if err := d.startShards(d.ctx, cfg); err != nil {
			d.log.Error("sharded listener could not start", "err", err)
		}
		return
	case sr == nil:
		return
	case !cfg.Shards.Enabled():
		// Removed: no new clients; open sessions go on until they end.
		sr.mu.Lock()
		if sr.ln != nil {
			sr.srv.RetireListener(sr.ln)
			sr.ln = nil
		}
		sr.cfg = cfg.Shards
		sr.mu.Unlock()
		return
	}
	d.shardClusters()
	if ln != nil {
		sr.mu.Lock()
		old := sr.ln
		sr.ln = ln
		sr.mu.Unlock()
		ctx := d.ctx
		d.wg.Go(func() { _ = sr.srv.Serve(ctx, ln) })
		if old != nil {
			sr.srv.RetireListener(old)
		}
	}
	sr.configure(cfg)
}

// Shards is GET /api/v1/shards.
func (d *daemon) Shards() any {
	sr := d.shards
	if sr == nil {
		return nil
	}
	m := sr.srv.Map()
	v := admin.ShardsView{Version: m.Version, Sessions: sr.srv.SessionCount(), Statements: sr.srv.Stats.ByCluster(),
		Refused: map[string]uint64{
			"cross_cluster": sr.srv.Stats.CrossCluster.Load(), "ambiguous": sr.srv.Stats.Ambiguous.Load(),
			"read_only": sr.srv.Stats.ReadOnly.Load(), "offline": sr.srv.Stats.Offline.Load(),
		}}
	sr.mu.Lock()
	if sr.ln != nil {
		v.Listen = sr.ln.Addr().String()
	}
	sr.mu.Unlock()
	for _, name := range m.Clusters {
		cv := admin.ShardClusterView{Name: name}
		if rt := d.clusterMap()[name]; rt != nil {
			if snap := rt.topo.Load(); snap != nil && snap.Writer >= 0 {
				cv.Writer = snap.Servers[snap.Writer].Name
			}
		}
		v.Clusters = append(v.Clusters, cv)
	}
	for _, s := range sr.srv.Schemas() {
		v.Schemas = append(v.Schemas, admin.ShardSchemaView(s))
	}
	return v
}

// SetShardState is POST /api/v1/shards/state.
func (d *daemon) SetShardState(ctx context.Context, r admin.ShardStateRequest) (any, error) {
	sr := d.shards
	if sr == nil {
		return nil, &admin.Error{Status: http.StatusNotFound, Message: "no sharded listener is configured (shards.listen)"}
	}
	if _, ok := frontend.ParseShardState(r.State); !ok {
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("state must be online, read_only or offline, not %q", r.State)}
	}
	if frontend.SystemSchema(r.Schema) {
		return nil, &admin.Error{Status: http.StatusBadRequest, Message: r.Schema + " is a system schema: it exists on every server and has no shard state"}
	}
	err := d.changeShards(ctx, func(ov *shardOverlay) {
		if ov.States == nil {
			ov.States = map[string]string{}
		}
		ov.States[r.Schema] = r.State
	})
	if err != nil {
		return nil, err
	}
	d.journal.add(admin.Event{Kind: "shard_state", Message: fmt.Sprintf("schema %s is %s on the sharded listener", r.Schema, r.State)})
	return d.Shards(), nil
}

// changeShards changes the overlay and publishes the new map: through
// etcd (compare-and-swap on its version; every instance applies it from
// the watch) or in state_dir.
func (d *daemon) changeShards(ctx context.Context, change func(*shardOverlay)) error {
	sr := d.shards
	if d.coord != nil {
		for range 5 {
			ver, data, err := d.coord.Shards(ctx)
			if err != nil {
				return &admin.Error{Status: http.StatusServiceUnavailable, Message: err.Error()}
			}
			var ov shardOverlay
			if len(data) > 0 {
				if err := json.Unmarshal(data, &ov); err != nil {
					return fmt.Errorf("the shard map in etcd is not valid JSON: %w", err)
				}
			}
			change(&ov)
			out, _ := json.Marshal(ov)
			nv, err := d.coord.SaveShards(ctx, ver, out)
			if errors.Is(err, coord.ErrShardsChanged) {
				continue
			}
			if err != nil {
				return &admin.Error{Status: http.StatusServiceUnavailable, Message: err.Error()}
			}
			sr.applyStored(d)(nv, out) // the watch brings it too; now, for the answer
			return nil
		}
		return &admin.Error{Status: http.StatusConflict, Message: coord.ErrShardsChanged.Error()}
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	next := shardOverlay{Schemas: maps.Clone(sr.overlay.Schemas), States: maps.Clone(sr.overlay.States), Hold: sr.overlay.Hold}
	change(&next)
	if err := writeJSONFile(shardsPath(d.running.Load().StateDir), next); err != nil {
		return fmt.Errorf("saving the shard map in state_dir: %w", err)
	}
	sr.overlay = next
	sr.publishLocked(false)
	return nil
}

func shardsPath(stateDir string) string { return filepath.Join(stateDir, "shards.json") }

// readJSONFile reads path into v; a missing file leaves v as it is.
func readJSONFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeJSONFile replaces path with v, through a temporary file.
func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

var (
	descShardSessions   = prometheus.NewDesc("vigil_shards_sessions", "Client sessions on the sharded listener.", nil, nil)
	descShardStatements = prometheus.NewDesc("vigil_shards_statements_total", "Statements the sharded listener ran, by cluster.", []string{"cluster"}, nil)
	descShardRefused    = prometheus.NewDesc("vigil_shards_refused_total", "Statements the sharded listener refused, by reason (cross_cluster 7016, ambiguous 7017, read_only 7018, offline 7019).", []string{"reason"}, nil)
	descShardVersion    = prometheus.NewDesc("vigil_shards_map_version", "Version of the shard map this instance routes by.", nil, nil)
	descShardDiscovery  = prometheus.NewDesc("vigil_shards_discoveries_total", "Lists of a cluster's schemas read for the sharded listener, by result (ok, failed).", []string{"result"}, nil)
)

func (m metricsCollector) collectShards(ch chan<- prometheus.Metric) {
	sr := m.d.shards
	if sr == nil {
		return
	}
	st := sr.srv.Stats
	ch <- prometheus.MustNewConstMetric(descShardSessions, prometheus.GaugeValue, float64(sr.srv.SessionCount()))
	ch <- prometheus.MustNewConstMetric(descShardVersion, prometheus.GaugeValue, float64(sr.srv.Map().Version))
	for c, n := range st.ByCluster() {
		ch <- prometheus.MustNewConstMetric(descShardStatements, prometheus.CounterValue, float64(n), c)
	}
	for reason, n := range map[string]uint64{"cross_cluster": st.CrossCluster.Load(), "ambiguous": st.Ambiguous.Load(), "read_only": st.ReadOnly.Load(), "offline": st.Offline.Load()} {
		ch <- prometheus.MustNewConstMetric(descShardRefused, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(descShardDiscovery, prometheus.CounterValue, float64(st.Discoveries.Load()), "ok")
	ch <- prometheus.MustNewConstMetric(descShardDiscovery, prometheus.CounterValue, float64(st.DiscoveryErrors.Load()), "failed")
}

func closeListener(ln net.Listener) {
	if ln != nil {
		ln.Close()
	}
}
