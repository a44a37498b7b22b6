package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vigil-db/vigil/internal/frontend"
	"github.com/vigil-db/vigil/internal/topology"
)

// metricsCollector turns the daemon's counters and the topology into
// Prometheus series at scrape time; nothing on the statement path touches
// Prometheus.
type metricsCollector struct{ d *daemon }

var (
	descServerState  = prometheus.NewDesc("vigil_server_state", "1 for the server's current state (ONLINE, SHUNNED, OFFLINE_SOFT, OFFLINE_HARD).", []string{"cluster", "server", "state"}, nil)
	descServerRole   = prometheus.NewDesc("vigil_server_role", "1 for the server's role (primary, replica, galera).", []string{"cluster", "server", "role"}, nil)
	descReadable     = prometheus.NewDesc("vigil_server_readable", "1 when the server may serve reads.", []string{"cluster", "server"}, nil)
	descWritable     = prometheus.NewDesc("vigil_server_writable", "1 when the server may serve writes.", []string{"cluster", "server"}, nil)
	descWriter       = prometheus.NewDesc("vigil_server_writer", "1 for the routed writer of the cluster.", []string{"cluster", "server"}, nil)
	descLag          = prometheus.NewDesc("vigil_server_replication_lag_seconds", "Replication lag as last observed (absent when unknown).", []string{"cluster", "server"}, nil)
	descTerm         = prometheus.NewDesc("vigil_cluster_writer_term", "Grows every time the routed writer changes.", []string{"cluster"}, nil)
	descSessions     = prometheus.NewDesc("vigil_client_sessions", "Connected client sessions.", []string{"cluster"}, nil)
	descConnections  = prometheus.NewDesc("vigil_client_connections_total", "Client connections accepted.", []string{"cluster"}, nil)
	descAuthFail     = prometheus.NewDesc("vigil_client_auth_failures_total", "Failed client logins.", []string{"cluster"}, nil)
	descQueries      = prometheus.NewDesc("vigil_queries_total", "Statements received from clients (COM_QUERY and COM_STMT_EXECUTE).", []string{"cluster"}, nil)
	descRoutes       = prometheus.NewDesc("vigil_routed_total", "Statements sent to a server, by route.", []string{"cluster", "route"}, nil)
	descErrors       = prometheus.NewDesc("vigil_client_errors_total", "Errors Vigil itself sent to clients.", []string{"cluster"}, nil)
	descReadRetries  = prometheus.NewDesc("vigil_read_retries_total", "Reads retried on another replica after a server failure.", []string{"cluster"}, nil)
	descGTIDWaits    = prometheus.NewDesc("vigil_gtid_waits_total", "Read-your-writes waits on a replica (MASTER_GTID_WAIT).", []string{"cluster"}, nil)
	descGTIDFallback = prometheus.NewDesc("vigil_gtid_wait_fallbacks_total", "Read-your-writes waits that timed out; the read went to the writer.", []string{"cluster"}, nil)
	descHeld         = prometheus.NewDesc("vigil_statements_held_total", "Statements that waited at a hold (switchover).", []string{"cluster"}, nil)
	descPins         = prometheus.NewDesc("vigil_session_pins_total", "Sessions pinned to their server connection, by reason.", []string{"cluster", "reason"}, nil)
	descPoolOpen     = prometheus.NewDesc("vigil_pool_connections", "Server connections open, by state.", []string{"cluster", "server", "state"}, nil)
	descPoolWaits    = prometheus.NewDesc("vigil_pool_waits_total", "Checkouts that waited for a free server connection.", []string{"cluster", "server"}, nil)
	descPoolDials    = prometheus.NewDesc("vigil_pool_dials_total", "Server connections opened.", []string{"cluster", "server"}, nil)
	descPoolDialErrs = prometheus.NewDesc("vigil_pool_dial_errors_total", "Server connections that failed to open.", []string{"cluster", "server"}, nil)

	descRuleHits     = prometheus.NewDesc("vigil_rule_hits_total", "Statements a query rule matched.", []string{"cluster", "rule"}, nil)
	descRuleActions  = prometheus.NewDesc("vigil_rule_actions_total", "Statements rules rewrote, blocked, timed out or mirrored, by action.", []string{"cluster", "action"}, nil)
	descDigests      = prometheus.NewDesc("vigil_digest_entries", "Entries in the digest statistics.", []string{"cluster"}, nil)
	descDigestEvict  = prometheus.NewDesc("vigil_digest_evictions_total", "Digest entries evicted to stay within digests.max_entries.", []string{"cluster"}, nil)
	descCacheBytes   = prometheus.NewDesc("vigil_query_cache_bytes", "Bytes held by the query cache.", nil, nil)
	descCacheEntries = prometheus.NewDesc("vigil_query_cache_entries", "Replies held by the query cache.", nil, nil)
	descCacheOps     = prometheus.NewDesc("vigil_query_cache_operations_total", "Query cache lookups and updates, by result (hit, miss, store, eviction, expired, too_big).", []string{"result"}, nil)
	descQlogEntries  = prometheus.NewDesc("vigil_query_log_entries_total", "Query log entries accepted from the data path.", nil, nil)
	descQlogDropped  = prometheus.NewDesc("vigil_query_log_dropped_total", "Query log entries dropped because the buffer was full (a slow or dead sink).", nil, nil)
	descQlogSink     = prometheus.NewDesc("vigil_query_log_sink_records_total", "Query log records per sink, by outcome (written, dropped, error).", []string{"sink", "outcome"}, nil)
)

func (m metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServerState, descServerRole, descReadable, descWritable, descWriter, descLag, descTerm,
		descSessions, descConnections, descAuthFail, descQueries, descRoutes, descErrors, descReadRetries, descGTIDWaits,
		descGTIDFallback, descHeld, descPins, descPoolOpen, descPoolWaits, descPoolDials, descPoolDialErrs,
		descRuleHits, descRuleActions, descDigests, descDigestEvict, descCacheBytes, descCacheEntries, descCacheOps,
		descQlogEntries, descQlogDropped, descQlogSink} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m metricsCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	for _, name := range m.d.clusterNames() {
		rt := m.d.clusters[name]
		if snap := rt.topo.Load(); snap != nil {
			gauge(descTerm, float64(snap.Term), name)
			for i, s := range snap.Servers {
				for _, st := range []topology.State{topology.Online, topology.Shunned, topology.OfflineSoft, topology.OfflineHard} {
					gauge(descServerState, b2f(s.State == st), name, s.Name, st.String())
				}
				gauge(descServerRole, 1, name, s.Name, s.Role.String())
				gauge(descReadable, b2f(s.Readable), name, s.Name)
				gauge(descWritable, b2f(s.Writable), name, s.Name)
				gauge(descWriter, b2f(i == snap.Writer), name, s.Name)
				if s.LagSeconds >= 0 {
					gauge(descLag, s.LagSeconds, name, s.Name)
				}
			}
		}
		st := rt.fe.Stats
		gauge(descSessions, float64(rt.fe.SessionCount()), name)
		counter(descConnections, st.Connections.Load(), name)
		counter(descAuthFail, st.AuthFailures.Load(), name)
		counter(descQueries, st.Queries.Load(), name)
		counter(descRoutes, st.ToWriter.Load(), name, "writer")
		counter(descRoutes, st.ToReader.Load(), name, "reader")
		counter(descErrors, st.Errors.Load(), name)
		counter(descReadRetries, st.ReadRetries.Load(), name)
		counter(descGTIDWaits, st.GTIDWaits.Load(), name)
		counter(descGTIDFallback, st.GTIDFallback.Load(), name)
		counter(descHeld, st.Held.Load(), name)
		for i, reason := range frontend.PinNames {
			counter(descPins, st.Pins[i].Load(), name, reason)
		}
		for _, rs := range rt.fe.ProcessingNow().Rules.Stats() {
			counter(descRuleHits, int64(rs.Hits), name, rs.Name)
		}
		counter(descRuleActions, st.Rewrites.Load(), name, "rewrite")
		counter(descRuleActions, st.Blocked.Load(), name, "block")
		counter(descRuleActions, st.Timeouts.Load(), name, "timeout")
		counter(descRuleActions, st.CacheHits.Load(), name, "cache_hit")
		counter(descRuleActions, st.Mirrored.Load(), name, "mirror")
		counter(descRuleActions, st.MirrorDrops.Load(), name, "mirror_dropped")
		counter(descRuleActions, st.MirrorErrors.Load(), name, "mirror_error")
		gauge(descDigests, float64(rt.digests.Len()), name)
		counter(descDigestEvict, int64(rt.digests.Evictions()), name)
		for _, p := range rt.pools {
			ps := p.Stats()
			gauge(descPoolOpen, float64(ps.Idle), name, p.Name, "idle")
			gauge(descPoolOpen, float64(ps.InUse), name, p.Name, "in_use")
			counter(descPoolWaits, ps.Waits, name, p.Name)
			counter(descPoolDials, ps.Dials, name, p.Name)
			counter(descPoolDialErrs, ps.DialErrors, name, p.Name)
		}
	}
	if c := m.d.cache; c != nil {
		cs := c.Stats()
		gauge(descCacheBytes, float64(cs.Bytes))
		gauge(descCacheEntries, float64(cs.Entries))
		for _, r := range []struct {
			n string
			v uint64
		}{{"hit", cs.Hits}, {"miss", cs.Misses}, {"store", cs.Stores}, {"eviction", cs.Evictions}, {"expired", cs.Expired}, {"too_big", cs.TooBig}} {
			counter(descCacheOps, int64(r.v), r.n)
		}
	}
	if q := m.d.qlog.Load(); q != nil {
		ls := q.logger.Stats()
		counter(descQlogEntries, int64(ls.Logged))
		counter(descQlogDropped, int64(ls.Dropped))
		for _, sk := range ls.Sinks {
			counter(descQlogSink, int64(sk.Written), sk.Name, "written")
			counter(descQlogSink, int64(sk.Dropped), sk.Name, "dropped")
			counter(descQlogSink, int64(sk.Errors), sk.Name, "error")
		}
	} else {
		counter(descQlogEntries, 0)
		counter(descQlogDropped, 0)
	}
}

func newRegistry(d *daemon) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), metricsCollector{d})
	return reg
}
