package daemon

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vigil-db/vigil/internal/failover"
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
	descGTIDSkipped  = prometheus.NewDesc("vigil_gtid_waits_skipped_total", "Read-your-writes waits skipped because the monitor had already seen the replica past the write.", []string{"cluster"}, nil)
	descHeld         = prometheus.NewDesc("vigil_statements_held_total", "Statements that waited at a hold (switchover).", []string{"cluster"}, nil)
	descPanics       = prometheus.NewDesc("vigil_session_panics_total", "Client sessions ended by an internal error (a recovered panic; the log has the stack).", []string{"cluster"}, nil)
	descScoped       = prometheus.NewDesc("vigil_session_scoped_total", "How statements that read what the previous statement left on its server connection were served (docs/routing.md): soft_hold (connection kept until the next statement), soft_hold_expired (given back after an idle second), on_previous (ran on the kept connection), rewritten (Vigil's ROW_COUNT()/FOUND_ROWS()/LAST_INSERT_ID() values sent), diagnostics_cleared (ran after Vigil emptied a connection's warnings), prepare_retried (a prepare or execute a replica failed for a missing object, retried on the writer), insert_id_fetched (LAST_INSERT_ID() asked after CALL, LOAD DATA or LAST_INSERT_ID(expr), which set it unseen).", []string{"cluster", "kind"}, nil)
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
	descLatency      = prometheus.NewDesc("vigil_query_duration_seconds", "Statement time as clients see it (from the command to the end of the reply), by route (writer, reader, group, cache, blocked).", []string{"cluster", "route"}, nil)
	descRouteErrors  = prometheus.NewDesc("vigil_query_errors_total", "Client statements that ended with an error (from the server or from Vigil), by route.", []string{"cluster", "route"}, nil)
	descSrvQueries   = prometheus.NewDesc("vigil_server_queries_total", "Client statements each server ran.", []string{"cluster", "server"}, nil)
	descSrvErrors    = prometheus.NewDesc("vigil_server_query_errors_total", "Client statements that ended with an error, by the server that ran them.", []string{"cluster", "server"}, nil)
	descUserQueries  = prometheus.NewDesc("vigil_user_queries_total", "Client statements by user.", []string{"cluster", "user"}, nil)
	descUserErrors   = prometheus.NewDesc("vigil_user_query_errors_total", "Client statements that ended with an error, by user.", []string{"cluster", "user"}, nil)
	descOps          = prometheus.NewDesc("vigil_operations_total", "Failovers, switchovers, Galera writer moves, rejoins and writer restores (restore-writer), by result (ok, failed, running).", []string{"cluster", "kind", "result"}, nil)
	descOpDuration   = prometheus.NewDesc("vigil_operation_duration_seconds", "How long finished failovers, switchovers, Galera writer moves, rejoins and writer restores took.", []string{"cluster", "kind"}, nil)
	descMonChecks    = prometheus.NewDesc("vigil_monitor_checks_total", "Health checks by result: good, failed, slow (timed out while the server completed client statements: not counted as failed), overloaded (alive but refusing connections: neither).", []string{"cluster", "server", "result"}, nil)
	descSemiAsync    = prometheus.NewDesc("vigil_semi_sync_async", "1 while a writable server with semi-sync enabled has fallen back to asynchronous replication (Rpl_semi_sync_master_status OFF): what it acknowledges now can be lost in a failover.", []string{"cluster", "server"}, nil)
	descSemiFalls    = prometheus.NewDesc("vigil_semi_sync_fallbacks_total", "Times a writable server was seen falling back from semi-sync to asynchronous replication.", []string{"cluster", "server"}, nil)
	descSemiAsyncSec = prometheus.NewDesc("vigil_semi_sync_async_seconds_total", "Time a writable server spent fallen back to asynchronous replication, as the monitor's checks saw it (up to the latest check).", []string{"cluster", "server"}, nil)
	descSemiNoTx     = prometheus.NewDesc("vigil_semi_sync_unacknowledged_commits", "The server's Rpl_semi_sync_master_no_tx as last seen (commits acknowledged without a replica since it started or since FLUSH STATUS); absent when semi-sync is not enabled there.", []string{"cluster", "server"}, nil)
	descWriterKept   = prometheus.NewDesc("vigil_monitor_writer_kept_total", "Failed checks after which the writer stayed routed because no other server could take the writes (the lone writer rule).", []string{"cluster", "server"}, nil)
	descUnauth       = prometheus.NewDesc("vigil_unauthenticated_connections", "Client connections that have not logged in yet (security.max_unauthenticated_connections).", nil, nil)
	descLoginGuard   = prometheus.NewDesc("vigil_login_guard_total", "Logins the guard acted on: refused (too many unauthenticated connections and none could make room), evicted (the oldest handshaking connection of the address holding the most, closed to admit a new one), throttled (a failed login's error delayed), blocked (a user and address blocked).", []string{"action"}, nil)
	descThreads      = prometheus.NewDesc("vigil_threads", "Threads running Vigil's Go code at once now (GOMAXPROCS): the threads setting, or with auto what the load needs.", nil, nil)
	descStmtMem      = prometheus.NewDesc("vigil_statement_memory_bytes", "Bytes that logged-in clients' large statements (over 16 KiB) hold now, all listeners together (security.statement_memory).", nil, nil)
	descStmtMemSpare = prometheus.NewDesc("vigil_statement_memory_spare_bytes", "Buffers of finished large statements kept for the next ones (within security.statement_memory together with vigil_statement_memory_bytes; dropped when no large statement is under way).", nil, nil)
	descStmtMemLimit = prometheus.NewDesc("vigil_statement_memory_limit_bytes", "security.statement_memory.", nil, nil)
	descStmtMemEvent = prometheus.NewDesc("vigil_statement_memory_total", "Large statements that waited for statement memory, were refused with error 1041 after waiting, or were let over the limit (overdraft: one at a time, so that statements holding part of the budget cannot wait for each other forever).", []string{"event"}, nil)
	descCloneBytes   = prometheus.NewDesc("vigil_clone_bytes_total", "Bytes streamed from donors to targets by clones.", []string{"cluster"}, nil)
	descClonesRun    = prometheus.NewDesc("vigil_clones_running", "Clones running now (at most one per cluster).", []string{"cluster"}, nil)
	descCloneFails   = prometheus.NewDesc("vigil_clone_failures_total", "Clones that failed (the target stayed out of routing).", []string{"cluster"}, nil)
	descQlogSink     = prometheus.NewDesc("vigil_query_log_sink_records_total", "Query log records per sink, by outcome (written, dropped, error).", []string{"sink", "outcome"}, nil)
)

func (m metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descServerState, descServerRole, descReadable, descWritable, descWriter, descLag, descTerm,
		descSessions, descConnections, descAuthFail, descQueries, descRoutes, descErrors, descReadRetries, descGTIDWaits,
		descGTIDFallback, descGTIDSkipped, descHeld, descPanics, descScoped, descPins, descPoolOpen, descPoolWaits, descPoolDials, descPoolDialErrs,
		descRuleHits, descRuleActions, descDigests, descDigestEvict, descCacheBytes, descCacheEntries, descCacheOps,
		descQlogEntries, descQlogDropped, descQlogSink, descLatency, descRouteErrors, descSrvQueries, descSrvErrors, descUserQueries, descUserErrors,
		descOps, descOpDuration, descMonChecks, descWriterKept, descUnauth, descLoginGuard,
		descThreads, descStmtMem, descStmtMemSpare, descStmtMemLimit, descStmtMemEvent, descCloneBytes, descClonesRun, descCloneFails,
		descCoordLease, descCoordValid, descCoordInstances, descCoordLeader, descCoordTerm, descCoordFenced,
		descShardSessions, descShardStatements, descShardRefused, descShardVersion, descShardDiscovery} {
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
	m.collectCoordination(ch)
	m.collectShards(ch)
	for _, name := range m.d.clusterNames() {
		rt := m.d.clusterMap()[name]
		snap := rt.topo.Load()
		cb, cf := m.d.cloneStats.get(name)
		counter(descCloneBytes, cb, name)
		counter(descCloneFails, cf, name)
		gauge(descClonesRun, float64(m.d.cloneManager().Running(name)), name)
		// A removed server's slot stays (a tombstone); its name may be
		// back in another slot: only live slots are reported.
		live := func(i int) bool { return snap != nil && i < len(snap.Servers) && !snap.Servers[i].Removed }
		if snap != nil {
			gauge(descTerm, float64(snap.Term), name)
			for i, s := range snap.Servers {
				if s.Removed {
					continue
				}
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
		if snap != nil {
			for i, c := range rt.mon.Checks() {
				if live(i) {
					srv := snap.Servers[i].Name
					counter(descMonChecks, int64(c.Good), name, srv, "good")
					counter(descMonChecks, int64(c.Failed), name, srv, "failed")
					counter(descMonChecks, int64(c.Slow), name, srv, "slow")
					counter(descMonChecks, int64(c.Overloaded), name, srv, "overloaded")
					counter(descWriterKept, int64(c.Kept), name, srv)
					gauge(descSemiAsync, b2f(!c.AsyncSince.IsZero()), name, srv)
					counter(descSemiFalls, int64(c.SemiSyncFallbacks), name, srv)
					ch <- prometheus.MustNewConstMetric(descSemiAsyncSec, prometheus.CounterValue, c.AsyncSeconds, name, srv)
					if c.NoTx >= 0 {
						gauge(descSemiNoTx, float64(c.NoTx), name, srv)
					}
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
		counter(descGTIDSkipped, st.GTIDKnown.Load(), name)
		counter(descHeld, st.Held.Load(), name)
		counter(descPanics, st.Panics.Load(), name)
		counter(descScoped, st.SoftHolds.Load(), name, "soft_hold")
		counter(descScoped, st.SoftHoldExpired.Load(), name, "soft_hold_expired")
		counter(descScoped, st.PrevReads.Load(), name, "on_previous")
		counter(descScoped, st.SessionRewrites.Load(), name, "rewritten")
		counter(descScoped, st.DiagClears.Load(), name, "diagnostics_cleared")
		counter(descScoped, st.PrepareRetries.Load(), name, "prepare_retried")
		counter(descScoped, st.InsertIDFetches.Load(), name, "insert_id_fetched")
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
		for r := range st.Latency {
			h := &st.Latency[r]
			buckets := make(map[float64]uint64, len(frontend.LatencyBounds))
			var cum uint64
			for i, b := range frontend.LatencyBounds {
				cum += h.Buckets[i].Load()
				buckets[b] = cum
			}
			cum += h.Buckets[len(frontend.LatencyBounds)].Load()
			ch <- prometheus.MustNewConstHistogram(descLatency, cum, float64(h.SumNs.Load())/1e9, buckets, name, frontend.RouteNames[r])
			counter(descRouteErrors, st.RouteErrors[r].Load(), name, frontend.RouteNames[r])
		}
		for i, p := range rt.poolList() {
			if live(i) && i < len(st.ServerQueries) {
				counter(descSrvQueries, st.ServerQueries[i].Load(), name, p.Name)
				counter(descSrvErrors, st.ServerErrors[i].Load(), name, p.Name)
			}
		}
		st.EachUser(func(user string, u *frontend.UserStats) {
			counter(descUserQueries, u.Queries.Load(), name, user)
			counter(descUserErrors, u.Errors.Load(), name, user)
		})
		if rt.exec != nil {
			operationMetrics(ch, name, rt.exec.History())
		}
		gauge(descDigests, float64(rt.digests.Len()), name)
		counter(descDigestEvict, int64(rt.digests.Evictions()), name)
		for i, p := range rt.poolList() {
			if !live(i) {
				continue
			}
			ps := p.Stats()
			gauge(descPoolOpen, float64(ps.Idle), name, p.Name, "idle")
			gauge(descPoolOpen, float64(ps.InUse), name, p.Name, "in_use")
			counter(descPoolWaits, ps.Waits, name, p.Name)
			counter(descPoolDials, ps.Dials, name, p.Name)
			counter(descPoolDialErrs, ps.DialErrors, name, p.Name)
		}
	}
	if g := m.d.guard; g != nil {
		gauge(descUnauth, float64(g.Unauthenticated()))
		counter(descLoginGuard, g.Refused.Load(), "refused")
		counter(descLoginGuard, g.Evicted.Load(), "evicted")
		counter(descLoginGuard, g.Throttled.Load(), "throttled")
		counter(descLoginGuard, g.Blocked.Load(), "blocked")
	}
	gauge(descThreads, float64(runtime.GOMAXPROCS(0)))
	if b := m.d.budget; b != nil {
		gauge(descStmtMem, float64(b.InUse()))
		gauge(descStmtMemSpare, float64(b.Spare()))
		gauge(descStmtMemLimit, float64(b.Limit()))
		counter(descStmtMemEvent, b.Waited.Load(), "waited")
		counter(descStmtMemEvent, b.Refused.Load(), "refused")
		counter(descStmtMemEvent, b.Overdrafts.Load(), "overdraft")
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

var opBounds = []float64{0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60}

// operationMetrics exports the executor's history: counts by kind and
// result, and a histogram of durations.
func operationMetrics(ch chan<- prometheus.Metric, cluster string, h failover.History) {
	type agg struct {
		results map[string]int64
		count   uint64
		sum     float64
		buckets map[float64]uint64
	}
	kinds := map[string]*agg{}
	for _, k := range []failover.RecordKind{failover.RecordFailover, failover.RecordSwitchover, failover.RecordGaleraMove, failover.RecordRejoin, failover.RecordRestoreWriter} {
		kinds[k.String()] = &agg{results: map[string]int64{"ok": 0, "failed": 0, "running": 0}, buckets: map[float64]uint64{}}
	}
	for _, r := range h.Records {
		a := kinds[r.Kind.String()]
		if a == nil {
			continue
		}
		switch {
		case r.Ended.IsZero():
			a.results["running"]++
			continue
		case r.OK:
			a.results["ok"]++
		default:
			a.results["failed"]++
		}
		d := r.Ended.Sub(r.Started).Seconds()
		a.count++
		a.sum += d
		for _, b := range opBounds {
			if d <= b {
				a.buckets[b]++
			}
		}
	}
	for kind, a := range kinds {
		for res, n := range a.results {
			ch <- prometheus.MustNewConstMetric(descOps, prometheus.CounterValue, float64(n), cluster, kind, res)
		}
		for _, b := range opBounds {
			if _, ok := a.buckets[b]; !ok {
				a.buckets[b] = 0
			}
		}
		ch <- prometheus.MustNewConstHistogram(descOpDuration, a.count, a.sum, a.buckets, cluster, kind)
	}
}
