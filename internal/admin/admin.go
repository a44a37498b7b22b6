// Package admin is Vigil's management HTTP server: the versioned REST API
// (/api/v1/...), Prometheus /metrics, and health endpoints. It reads state
// through the Controller the daemon gives it and submits operator commands
// to it; it is never on the statement path.
package admin

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vigil-db/vigil/internal/webui"
)

// ServerView is one server as the API shows it.
type ServerView struct {
	Name       string   `json:"name"`
	Address    string   `json:"address"`
	Cluster    string   `json:"cluster"`
	Role       string   `json:"role"`
	State      string   `json:"state"`
	Readable   bool     `json:"readable"`
	Writable   bool     `json:"writable"`
	Writer     bool     `json:"writer"`
	LagSeconds *float64 `json:"lag_seconds"`
	GTID       string   `json:"gtid"`
	Reason     string   `json:"reason,omitempty"`
	Pool       PoolView `json:"pool"`
	// Queries counts the client statements the server ran (for rates).
	Queries int64 `json:"queries"`
	// Weight is the read weight; Standby marks a standby (never routed,
	// promoted only when named).
	Weight  int  `json:"weight"`
	Standby bool `json:"standby,omitempty"`
	// SemiSyncAsyncSince: the server (writable, semi-sync enabled) has
	// fallen back to asynchronous replication since then.
	SemiSyncAsyncSince *time.Time `json:"semi_sync_async_since,omitempty"`
}

// PoolView is a server's connection pool usage.
type PoolView struct {
	Open  int   `json:"open"`
	Idle  int   `json:"idle"`
	InUse int   `json:"in_use"`
	Waits int64 `json:"waits"`
}

// Event is one entry of the journal.
type Event struct {
	Time    time.Time `json:"time"`
	Cluster string    `json:"cluster"`
	Server  string    `json:"server,omitempty"`
	Kind    string    `json:"kind"`
	From    string    `json:"from,omitempty"`
	To      string    `json:"to,omitempty"`
	Message string    `json:"message"`
}

// OpRequest is the body of POST /api/v1/switchover and /failover.
type OpRequest struct {
	Cluster string `json:"cluster,omitempty"`
	To      string `json:"to,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
	// Force lets a failover run while the primary still answers checks.
	Force bool `json:"force,omitempty"`
	// AcceptLoss lets a failover promote a server that lacks transactions
	// the old primary is known to have acknowledged.
	AcceptLoss bool `json:"accept_loss,omitempty"`
}

// OpResult is what an operation returns.
type OpResult struct {
	OK        bool     `json:"ok"`
	DryRun    bool     `json:"dry_run,omitempty"`
	Cluster   string   `json:"cluster"`
	Old       string   `json:"old_primary,omitempty"`
	New       string   `json:"new_primary,omitempty"`
	Plan      string   `json:"plan,omitempty"`
	Steps     []string `json:"steps,omitempty"`
	Message   string   `json:"message"`
	PauseMs   float64  `json:"write_pause_ms,omitempty"`
	ElapsedMs float64  `json:"elapsed_ms,omitempty"`
}

// Controller is what the daemon exposes to operators.
type Controller interface {
	Servers() []ServerView
	Events(cluster, server, kind string, since time.Time, limit int) []Event
	Sessions() any
	Switchover(ctx context.Context, r OpRequest) (OpResult, error)
	Failover(ctx context.Context, r OpRequest) (OpResult, error)
	Ack(ctx context.Context, cluster string) (OpResult, error)
	Rejoin(ctx context.Context, cluster, node string) (OpResult, error)
	SetServerState(ctx context.Context, cluster, server, state string) error
	Reload(ctx context.Context) error
	Ready() (bool, string)

	// KillSession ends a client session, or with query only its running
	// statement.
	KillSession(ctx context.Context, cluster string, id uint32, query bool) error
	// Digests lists statement statistics; ResetDigests forgets them.
	Digests(q DigestQuery) (any, error)
	ResetDigests(cluster string) error
	// Rules lists the query rules with their hit counters.
	Rules() any
	// QueryCache reports the result cache; PurgeQueryCache empties it.
	QueryCache() any
	PurgeQueryCache()
	// QueryLog reports the query log's counters.
	QueryLog() any
}

// CloneRequest is the body of POST /api/v1/clone.
type CloneRequest struct {
	Cluster string `json:"cluster,omitempty"`
	// Target is the server to overwrite; From the donor ("": Vigil
	// chooses).
	Target string `json:"target"`
	From   string `json:"from,omitempty"`
	// Rate limits the stream in bytes per second (0: the agent's limit).
	Rate int64 `json:"rate,omitempty"`
	// DryRun: answer with what the clone would do (200), start nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Kind is clone (POST /api/v1/clone) or rebuild (POST
	// /api/v1/rebuild: the target is a member overwritten in place after
	// the salvage handshake, a fenced old primary too).
	Kind string `json:"kind,omitempty"`
}

// Cloner is the optional part of a Controller that clones servers
// through their agents (docs/lifecycle.md); without it the clone routes
// answer 501.
type Cloner interface {
	// Clone starts a clone and returns it (its progress), or refuses
	// with an *Error (409 when another clone runs or the target is the
	// writer).
	Clone(ctx context.Context, r CloneRequest) (any, error)
	// Clones is the running clones and the last finished ones.
	Clones() any
}

// Sharder is the optional part of a Controller that runs the sharded
// listener (docs/shards.md).
type Sharder interface {
	// Shards is the sharded listener: its map, schemas and counters.
	Shards() any
	// SetShardState sets a schema's shard state (online, read_only,
	// offline) on every instance, or refuses with an *Error.
	SetShardState(ctx context.Context, r ShardStateRequest) (any, error)
}

// ShardsView is GET /api/v1/shards.
type ShardsView struct {
	Listen string `json:"listen"`
	// Version of the shard map every instance routes by (etcd's revision
	// of it when coordinated).
	Version  uint64             `json:"version"`
	Clusters []ShardClusterView `json:"clusters"`
	Schemas  []ShardSchemaView  `json:"schemas"`
	Sessions int                `json:"sessions"`
	// Statements run, by cluster; Refused by reason.
	Statements map[string]uint64 `json:"statements"`
	Refused    map[string]uint64 `json:"refused"`
}

// ShardClusterView is one cluster behind the sharded listener.
type ShardClusterView struct {
	Name   string `json:"name"`
	Writer string `json:"writer,omitempty"`
}

// ShardSchemaView is one schema as the sharded listener places it.
type ShardSchemaView struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster,omitempty"`
	State   string `json:"state"`
	// Source: map (shards.map, or set at run time) or discovered.
	Source   string   `json:"source"`
	Conflict []string `json:"conflict,omitempty"`
}

// ShardMoveRequest is the body of POST /api/v1/shards/move.
type ShardMoveRequest struct {
	Schema string `json:"schema"`
	To     string `json:"to,omitempty"`
	// Kind is move (default); cleanup (drop the moved schema's source
	// copy, on the operator's word); cutover (the go-ahead of a move
	// started with ManualCutover that waits for it); abort (undo a move
	// that has not cut over: it waits, or it failed); rollback (route a
	// moved schema back over the reverse connection of a move made with
	// Reverse).
	Kind    string `json:"kind,omitempty"`
	DryRun  bool   `json:"dry_run,omitempty"`
	Reverse bool   `json:"reverse,omitempty"`
	// ManualCutover: copy and catch up, then wait (following the source)
	// until a request of Kind cutover.
	ManualCutover bool `json:"manual_cutover,omitempty"`
}

// Mover is the optional part of a Controller that moves schemas between
// the clusters behind the sharded listener.
type Mover interface {
	MoveShard(ctx context.Context, r ShardMoveRequest) (any, error)
	Moves() any
}

// ShardStateRequest is the body of POST /api/v1/shards/state.
type ShardStateRequest struct {
	Schema string `json:"schema"`
	State  string `json:"state"`
}

// DigestQuery selects digest rows (GET /api/v1/digests).
type DigestQuery struct {
	Cluster string
	// By is "digest" (default: one row per digest) or "key" (one row per
	// digest, user, schema and hostgroup).
	By     string
	Sort   string
	Limit  int
	Digest string
	User   string
	Schema string
}

// Error is an API error with its HTTP status.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// Options configure the admin server.
type Options struct {
	Listen string
	Token  string // accepted as "Authorization: Bearer <token>"
	// User and Password, when set, are accepted as basic auth too.
	User, Password string
	// NoAuth serves without credentials (admin.auth: none, loopback
	// only). Otherwise a request needs the token or the user: with
	// neither configured every request is refused.
	NoAuth bool
	// TLS, when set, serves HTTPS. SetOptions may change its certificate,
	// not turn it on or off.
	TLS *tls.Config
}

// Server is the admin HTTP server.
type Server struct {
	opts atomic.Pointer[Options]
	ctl  Controller
	reg  *prometheus.Registry
	log  *slog.Logger
	mux  *http.ServeMux
}

// New builds the admin server; reg holds the daemon's metrics.
func New(opts Options, ctl Controller, reg *prometheus.Registry, log *slog.Logger) *Server {
	s := &Server{ctl: ctl, reg: reg, log: log, mux: http.NewServeMux()}
	s.opts.Store(&opts)
	s.routes()
	return s
}

// SetOptions swaps the credentials and the TLS certificate (reload): the
// old token stops working at once.
func (s *Server) SetOptions(o Options) { s.opts.Store(&o) }

func (s *Server) o() *Options { return s.opts.Load() }

func (s *Server) routes() {
	s.docRoutes()
	// web dashboard: routes of the embedded UI go here.
	// The page and its assets need no token (the stream does), but a
	// foreign Host gets 403 as on the API: a rebound name never serves
	// the dashboard.
	s.mux.Handle(webui.Prefix, s.sameHost(webui.Handler(webui.Source{
		Servers: func() any { return s.ctl.Servers() },
		Events:  func(limit int) any { return s.ctl.Events("", "", "", time.Time{}, limit) },
		Digests: func(limit int) (any, error) { return s.ctl.Digests(DigestQuery{Sort: "total", Limit: limit}) },
		Coordination: func() any {
			if c, ok := s.ctl.(interface{ Coordination() json.RawMessage }); ok {
				return c.Coordination()
			}
			return nil
		},
		Clones: func() any {
			if c, ok := s.ctl.(Cloner); ok {
				return c.Clones()
			}
			return nil
		},
		Shards: func() any {
			sh, ok := s.ctl.(Sharder)
			if !ok {
				return nil
			}
			v := sh.Shards()
			if v == nil {
				return nil
			}
			out := map[string]any{"listener": v}
			if m, ok := s.ctl.(Mover); ok {
				out["moves"] = m.Moves()
			}
			return out
		},
	}, webui.Options{Auth: s.auth})))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, webui.Prefix, http.StatusFound) })
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ok, why := s.ctl.Ready()
		if !ok {
			writeJSON(w, 503, map[string]string{"status": "not ready", "reason": why})
			return
		}
		writeJSON(w, 200, map[string]string{"status": "ready"})
	})
	s.mux.Handle("GET /metrics", s.auth(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	s.mux.Handle("GET /api/v1/servers", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.ctl.Servers())
	})))
	s.mux.Handle("GET /api/v1/sessions", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.ctl.Sessions())
	})))
	s.mux.Handle("GET /api/v1/events", s.auth(http.HandlerFunc(s.events)))
	s.mux.Handle("POST /api/v1/switchover", s.auth(s.op(s.ctl.Switchover)))
	s.mux.Handle("POST /api/v1/failover", s.auth(s.op(s.ctl.Failover)))
	s.mux.Handle("POST /api/v1/ack", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req OpRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		res, err := s.ctl.Ack(r.Context(), req.Cluster)
		s.reply(w, res, err)
	})))
	s.mux.Handle("POST /api/v1/rejoin/{node}", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := s.ctl.Rejoin(r.Context(), r.URL.Query().Get("cluster"), r.PathValue("node"))
		s.reply(w, res, err)
	})))
	s.mux.Handle("POST /api/v1/clone", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.clone(w, r, "clone") })))
	s.mux.Handle("POST /api/v1/rebuild", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.clone(w, r, "rebuild") })))
	s.mux.Handle("GET /api/v1/shards", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sh, ok := s.ctl.(Sharder)
		if !ok {
			writeErr(w, &Error{http.StatusNotImplemented, "this Vigil has no sharded listener"})
			return
		}
		v := sh.Shards()
		if v == nil {
			writeErr(w, &Error{http.StatusNotFound, "no sharded listener is configured (shards.listen)"})
			return
		}
		writeJSON(w, 200, v)
	})))
	s.mux.Handle("POST /api/v1/shards/state", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sh, ok := s.ctl.(Sharder)
		if !ok {
			writeErr(w, &Error{http.StatusNotImplemented, "this Vigil has no sharded listener"})
			return
		}
		var req ShardStateRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Schema == "" || req.State == "" {
			writeErr(w, &Error{400, "body must be JSON: {\"schema\": \"tenant1\", \"state\": \"read_only\"}"})
			return
		}
		res, err := sh.SetShardState(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, res)
	})))
	s.mux.Handle("POST /api/v1/shards/move", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := s.ctl.(Mover)
		if !ok {
			writeErr(w, &Error{http.StatusNotImplemented, "this Vigil does not move schemas"})
			return
		}
		var req ShardMoveRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Schema == "" || (req.To == "" && (req.Kind == "" || req.Kind == "move")) {
			writeErr(w, &Error{400, "body must be JSON: {\"schema\": \"tenant1\", \"to\": \"cluster2\"} (or {\"schema\": \"tenant1\", \"kind\": \"cleanup\"}, kind cutover or abort)"})
			return
		}
		res, err := m.MoveShard(r.Context(), req)
		if err != nil {
			writeErr(w, err)
			return
		}
		status := http.StatusAccepted
		if req.DryRun {
			status = http.StatusOK
		}
		writeJSON(w, status, res)
	})))
	s.mux.Handle("GET /api/v1/shards/move", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := s.ctl.(Mover)
		if !ok {
			writeErr(w, &Error{http.StatusNotImplemented, "this Vigil does not move schemas"})
			return
		}
		writeJSON(w, 200, m.Moves())
	})))
	s.mux.Handle("GET /api/v1/clone", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.ctl.(Cloner)
		if !ok {
			writeErr(w, &Error{http.StatusNotImplemented, "this Vigil does not clone"})
			return
		}
		writeJSON(w, 200, c.Clones())
	})))
	s.mux.Handle("POST /api/v1/servers/{name}/state", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Cluster string `json:"cluster"`
			State   string `json:"state"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeErr(w, &Error{400, "body must be JSON: {\"state\": \"OFFLINE_SOFT\"}"})
			return
		}
		if err := s.ctl.SetServerState(r.Context(), body.Cluster, r.PathValue("name"), body.State); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "server": r.PathValue("name"), "state": body.State})
	})))
	s.mux.Handle("DELETE /api/v1/sessions/{id}", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id uint32
		if _, err := fmt.Sscan(r.PathValue("id"), &id); err != nil {
			writeErr(w, &Error{400, "session id must be a number"})
			return
		}
		query := r.URL.Query().Get("query") == "true" || r.URL.Query().Get("query") == "1"
		if err := s.ctl.KillSession(r.Context(), r.URL.Query().Get("cluster"), id, query); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "id": id, "query_only": query})
	})))
	s.mux.Handle("GET /api/v1/digests", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		dq := DigestQuery{Cluster: q.Get("cluster"), By: q.Get("by"), Sort: q.Get("sort"), Digest: q.Get("digest"), User: q.Get("user"), Schema: q.Get("schema")}
		if v := q.Get("limit"); v != "" {
			if _, err := fmt.Sscan(v, &dq.Limit); err != nil {
				writeErr(w, &Error{400, "limit must be a number"})
				return
			}
		}
		if !oneOf(dq.By, "", "digest", "key") {
			writeErr(w, &Error{400, "by must be digest or key"})
			return
		}
		if !oneOf(dq.Sort, "", "total", "count", "errors", "rows", "max", "p99") {
			writeErr(w, &Error{400, "sort must be total, count, errors, rows, max or p99"})
			return
		}
		rows, err := s.ctl.Digests(dq)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, rows)
	})))
	s.mux.Handle("DELETE /api/v1/digests", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.ctl.ResetDigests(r.URL.Query().Get("cluster")); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true})
	})))
	s.mux.Handle("GET /api/v1/rules", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.ctl.Rules())
	})))
	s.mux.Handle("GET /api/v1/query_cache", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.ctl.QueryCache())
	})))
	s.mux.Handle("GET /api/v1/coordination", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := s.ctl.(interface{ Coordination() json.RawMessage })
		if !ok {
			writeJSON(w, 200, map[string]bool{"enabled": false})
			return
		}
		writeJSON(w, 200, c.Coordination())
	})))
	s.mux.Handle("DELETE /api/v1/query_cache", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ctl.PurgeQueryCache()
		writeJSON(w, 200, map[string]any{"ok": true})
	})))
	s.mux.Handle("GET /api/v1/query_log", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, s.ctl.QueryLog())
	})))
	s.mux.Handle("POST /api/v1/config/reload", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.ctl.Reload(r.Context()); err != nil {
			writeErr(w, &Error{400, err.Error()})
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true})
	})))
}

func (s *Server) op(f func(context.Context, OpRequest) (OpResult, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req OpRequest
		if r.ContentLength != 0 {
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				writeErr(w, &Error{400, "body must be JSON: {\"to\": \"node2\", \"dry_run\": true}"})
				return
			}
		}
		res, err := f(r.Context(), req)
		s.reply(w, res, err)
	})
}

func (s *Server) reply(w http.ResponseWriter, res OpResult, err error) {
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			writeJSON(w, ae.Status, OpResult{OK: false, Cluster: res.Cluster, Message: ae.Message, Plan: res.Plan})
			return
		}
		writeJSON(w, 500, OpResult{OK: false, Cluster: res.Cluster, Message: err.Error(), Plan: res.Plan, Steps: res.Steps})
		return
	}
	writeJSON(w, 200, res)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeErr(w, &Error{400, "since must be RFC 3339, e.g. 2026-01-02T15:04:05Z"})
			return
		}
		since = t
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		fmt.Sscan(v, &limit)
	}
	ev := s.ctl.Events(q.Get("cluster"), q.Get("server"), q.Get("kind"), since, limit)
	if ev == nil {
		ev = []Event{}
	}
	writeJSON(w, 200, ev)
}

// auth requires the bearer token (or basic auth with any user and the
// token as password).
func (s *Server) auth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg, status := s.crossSite(r); status != 0 {
			writeJSON(w, status, map[string]string{"error": msg})
			return
		}
		if !s.o().NoAuth && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
			writeJSON(w, 401, map[string]string{"error": "unauthorized: send Authorization: Bearer <token> (admin.token, or the file STATE_DIR/admin-token Vigil generated; vigil ctl --token-file)"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sameHost refuses a request whose Host is not this server's (crossSite's
// first test), for handlers that need no token.
func (s *Server) sameHost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if msg := s.foreignHost(r); msg != "" {
			writeJSON(w, http.StatusForbidden, map[string]string{"error": msg})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// foreignHost says why r's Host is not this admin server's (DNS
// rebinding), or "".
func (s *Server) foreignHost(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	listenHost, _, _ := net.SplitHostPort(s.o().Listen)
	if net.ParseIP(strings.Trim(host, "[]")) == nil && host != "localhost" && !strings.EqualFold(host, listenHost) {
		return fmt.Sprintf("Host %q is not this admin server's address: refused (DNS rebinding protection); use an IP address, localhost or %q", r.Host, listenHost)
	}
	return ""
}

// crossSite refuses what a web page the operator visits could send: a
// Host that is not this server's (DNS rebinding), a state-changing
// request from another Origin, or one that is not JSON (a "simple"
// cross-site POST of a form or text/plain needs no CORS preflight).
func (s *Server) crossSite(r *http.Request) (string, int) {
	if msg := s.foreignHost(r); msg != "" {
		return msg, http.StatusForbidden
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return "", 0
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("Origin %q is not this admin server: cross-site requests are refused", o), http.StatusForbidden
		}
	}
	// A browser sends a cross-site request without asking first (CORS
	// preflight) only with no body type or one of these.
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	switch strings.ToLower(strings.TrimSpace(ct)) {
	case "", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data":
		return "state-changing requests must send Content-Type: application/json (or application/yaml for a config)", http.StatusUnsupportedMediaType
	}
	return "", 0
}

// authorized checks the bearer token, or basic auth with the configured
// user and password, or basic auth with the token as the password.
func (s *Server) authorized(r *http.Request) bool {
	eq := func(a, b string) bool { return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return eq(strings.TrimPrefix(a, "Bearer "), s.o().Token)
	}
	u, p, ok := r.BasicAuth()
	if !ok {
		return false
	}
	o := s.o()
	if o.User != "" && eq(u, o.User) && eq(p, o.Password) {
		return true
	}
	return eq(p, o.Token)
}

func (s *Server) clone(w http.ResponseWriter, r *http.Request, kind string) {
	c, ok := s.ctl.(Cloner)
	if !ok {
		writeErr(w, &Error{http.StatusNotImplemented, "this Vigil does not clone"})
		return
	}
	var req CloneRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Target == "" {
		writeErr(w, &Error{400, "body must be JSON naming the target: {\"target\": \"node3\", \"from\": \"node2\"}"})
		return
	}
	req.Kind = kind
	op, err := c.Clone(r.Context(), req)
	if err != nil {
		writeErr(w, err)
		return
	}
	if req.DryRun {
		writeJSON(w, http.StatusOK, op)
		return
	}
	writeJSON(w, http.StatusAccepted, op)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *Error
	if errors.As(err, &ae) {
		writeJSON(w, ae.Status, map[string]string{"error": ae.Message})
		return
	}
	writeJSON(w, 500, map[string]string{"error": err.Error()})
}

// Serve listens on opts.Listen until ctx ends.
func (s *Server) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.o().Listen)
	if err != nil {
		return fmt.Errorf("admin listen on %s: %w", s.o().Listen, err)
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener serves on ln until ctx ends.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	// Requests (the dashboard's stream) end with ctx.
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if s.o().TLS != nil {
		// The certificate of the options in force at each handshake: a
		// reload changes it without a restart.
		tc := &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			if c := s.o().TLS; c != nil {
				return c, nil
			}
			return nil, errors.New("admin TLS turned off by a reload: restart Vigil")
		}}
		srv.TLSConfig = tc
		ln = tls.NewListener(ln, tc)
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler exposes the mux (tests).
func (s *Server) Handler() http.Handler { return s.mux }

func oneOf(s string, opts ...string) bool {
	for _, o := range opts {
		if s == o {
			return true
		}
	}
	return false
}
