// Package webui is Vigil's web dashboard: a single page served from
// embedded assets (no CDN, it works offline) and the live stream of state
// it draws from. The page shows the topology as a graph, a timeline of
// events and the top digests, and it submits switchovers and drains
// through the admin REST API. It also lists the running and recent
// clones with their progress.
//
// The admin server mounts it (admin imports webui, so webui must not
// import admin): it adapts its Controller to a Source and passes its own
// authentication middleware. The static assets carry no data and are
// served without authentication; the stream is authenticated like every
// other endpoint, with the "Authorization: Bearer <token>" header. The
// page reads the stream with fetch() rather than EventSource, which cannot
// send headers, so the token never travels in a URL (where it would end in
// access logs, browser history and Referer headers).
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"time"
)

// Prefix is where the dashboard lives on the admin server.
const Prefix = "/ui/"

// StreamPath is the dashboard's event stream. It is part of the dashboard,
// not of the versioned API: its snapshot format may change with the page.
const StreamPath = Prefix + "stream"

//go:embed assets
var assets embed.FS

// Source is where the dashboard reads its data. The values are encoded as
// JSON as they are; the page expects the shapes of the admin API
// (GET /api/v1/servers, /events and /digests). A nil function leaves its
// part of the snapshot empty.
type Source struct {
	// Servers lists the servers of every cluster.
	Servers func() any
	// Events returns the newest limit events, oldest first.
	Events func(limit int) any
	// Digests returns the top limit digests by total time.
	Digests func(limit int) (any, error)
	// Coordination reports the etcd coordination among Vigil instances
	// (nil or a nil value: a single Vigil).
	Coordination func() any
	// Clones is GET /api/v1/clone: {"running": [...], "finished": [...]}
	// of lifecycle.Progress (nil or a nil value: this Vigil does not
	// clone, and the page hides the panel).
	Clones func() any
	// Shards is the sharded listener: {"listener": GET /api/v1/shards,
	// "moves": GET /api/v1/shards/move} (nil or a nil value: none is
	// configured, and the page hides the panel).
	Shards func() any
}

// Options tune the dashboard. The zero value is usable.
type Options struct {
	// Auth wraps the handlers that return data (the stream). Nil serves
	// them to anyone: the admin server passes its token check.
	Auth func(http.Handler) http.Handler
	// Interval is how often the stream sends a snapshot (default 500 ms).
	Interval time.Duration
	// Heartbeat is how often the stream sends a comment line to keep
	// idle proxies from closing it (default 15 s).
	Heartbeat time.Duration
	// Events and Digests are how many of each a snapshot carries
	// (defaults 50 and 10).
	Events, Digests int
}

func (o Options) withDefaults() Options {
	if o.Auth == nil {
		o.Auth = func(h http.Handler) http.Handler { return h }
	}
	if o.Interval <= 0 {
		o.Interval = 500 * time.Millisecond
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Events <= 0 {
		o.Events = 50
	}
	if o.Digests <= 0 {
		o.Digests = 10
	}
	return o
}

// Handler serves the dashboard under Prefix: the page and its assets at
// GET /ui/ and GET /ui/{file}, and the stream at GET /ui/stream. Mount it
// with mux.Handle(webui.Prefix, h).
func Handler(src Source, opts Options) http.Handler {
	opts = opts.withDefaults()
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	mux := http.NewServeMux()
	// Literal patterns (Prefix and StreamPath spelled out) so that the
	// admin package's OpenAPI test sees the routes.
	mux.Handle("GET /ui/stream", opts.Auth(&streamHandler{src: src, opts: opts}))
	files := http.StripPrefix(Prefix, http.FileServerFS(static))
	mux.Handle("GET /ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The page is small and changes with the binary: always revalidate.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
		files.ServeHTTP(w, r)
	}))
	return mux
}

// contentSecurityPolicy keeps the page to its own assets: no inline
// script, nothing from other origins.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'"
