package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/webui"
)

type server struct {
	Name  string `json:"name"`
	State string `json:"state"`
}

type snapshot struct {
	Time         time.Time `json:"time"`
	Servers      []server  `json:"servers"`
	Events       []any     `json:"events"`
	Digests      []any     `json:"digests"`
	DigestsError string    `json:"digests_error"`
}

// sseReader reads the events of a text/event-stream body.
type sseReader struct{ r *bufio.Reader }

type sseEvent struct {
	name, data string
	comments   []string
}

// next returns the next block: an event, or only comments and fields.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return ev, nil
		case strings.HasPrefix(line, ":"):
			ev.comments = append(ev.comments, line)
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// nextSnapshot skips to the next snapshot event and decodes it.
func (s *sseReader) nextSnapshot(t *testing.T) snapshot {
	t.Helper()
	for {
		ev, err := s.next()
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		if ev.name != "snapshot" {
			continue
		}
		var snap snapshot
		if err := json.Unmarshal([]byte(ev.data), &snap); err != nil {
			t.Fatalf("snapshot is not JSON: %v\n%s", err, ev.data)
		}
		return snap
	}
}

func openStream(t *testing.T, ctx context.Context, url string, header http.Header) (*http.Response, *sseReader) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url+webui.StreamPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, &sseReader{bufio.NewReader(resp.Body)}
}

func fakeSource(calls *atomic.Int64) webui.Source {
	return webui.Source{
		Servers: func() any {
			calls.Add(1)
			return []server{{"node1", "ONLINE"}, {"node2", "SHUNNED"}}
		},
		Events: func(limit int) any {
			return []map[string]string{{"kind": "failover", "limit": strings.Repeat("x", limit)}}
		},
		Digests: func(limit int) (any, error) { return []map[string]any{{"digest": "abc", "count": limit}}, nil },
	}
}

func TestStreamSendsSnapshotOnConnect(t *testing.T) {
	var calls atomic.Int64
	// A long interval: the first snapshot must not wait for the ticker.
	srv := httptest.NewServer(webui.Handler(fakeSource(&calls), webui.Options{Interval: time.Hour, Events: 3, Digests: 7}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, sse := openStream(t, ctx, srv.URL, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	snap := sse.nextSnapshot(t)
	if len(snap.Servers) != 2 || snap.Servers[1] != (server{"node2", "SHUNNED"}) {
		t.Errorf("servers %+v", snap.Servers)
	}
	if len(snap.Events) != 1 || snap.Events[0].(map[string]any)["limit"] != "xxx" {
		t.Errorf("events %+v (want one, asked with limit 3)", snap.Events)
	}
	if len(snap.Digests) != 1 || snap.Digests[0].(map[string]any)["count"] != 7.0 {
		t.Errorf("digests %+v (want one, asked with limit 7)", snap.Digests)
	}
	if snap.Time.IsZero() || time.Since(snap.Time) > time.Minute {
		t.Errorf("time %v", snap.Time)
	}
}

func TestStreamRepeatsAndHeartbeats(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(webui.Handler(fakeSource(&calls), webui.Options{Interval: 20 * time.Millisecond, Heartbeat: 30 * time.Millisecond}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, sse := openStream(t, ctx, srv.URL, nil)
	snapshots, beats := 0, 0
	for snapshots < 3 || beats < 1 {
		ev, err := sse.next()
		if err != nil {
			t.Fatalf("after %d snapshots and %d heartbeats: %v", snapshots, beats, err)
		}
		if ev.name == "snapshot" {
			snapshots++
		}
		for _, c := range ev.comments {
			if c == ": heartbeat" {
				beats++
			}
		}
	}
}

func TestStreamStopsWhenClientLeaves(t *testing.T) {
	var calls atomic.Int64
	h := webui.Handler(fakeSource(&calls), webui.Options{Interval: 10 * time.Millisecond})
	returned := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == webui.StreamPath {
			close(returned)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cctx, disconnect := context.WithCancel(ctx)
	_, sse := openStream(t, cctx, srv.URL, nil)
	sse.nextSnapshot(t)
	sse.nextSnapshot(t)
	disconnect()
	select {
	case <-returned:
	case <-ctx.Done():
		t.Fatal("the stream handler still runs 5 s after its client left")
	}
	// Nothing polls the source any more.
	n := calls.Load()
	time.Sleep(50 * time.Millisecond)
	if m := calls.Load(); m != n {
		t.Errorf("the source was read %d more times after the handler returned", m-n)
	}
}

func TestStreamWithoutData(t *testing.T) {
	src := webui.Source{
		Servers: func() any { return []server(nil) }, // encodes as null
		Digests: func(int) (any, error) { return nil, errors.New("digest statistics are disabled") },
	}
	srv := httptest.NewServer(webui.Handler(src, webui.Options{}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	data := firstSnapshot(t, ctx, srv.URL)
	// Empty lists, never null: the page iterates them.
	for _, k := range []string{`"servers":[]`, `"events":[]`, `"digests":[]`, `"digests_error":"digest statistics are disabled"`} {
		if !strings.Contains(data, k) {
			t.Errorf("snapshot lacks %s: %s", k, data)
		}
	}
}

// firstSnapshot opens the stream at url and returns the data of its
// first snapshot event.
func firstSnapshot(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	_, sse := openStream(t, ctx, url, nil)
	for {
		ev, err := sse.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.name == "snapshot" {
			return ev.data
		}
	}
}

func TestAuthGuardsOnlyTheStream(t *testing.T) {
	var calls atomic.Int64
	auth := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(webui.Handler(fakeSource(&calls), webui.Options{Auth: auth}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, _ := openStream(t, ctx, srv.URL, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stream without a token: %d, want 401", resp.StatusCode)
	}
	if calls.Load() != 0 {
		t.Error("the source was read for an unauthenticated client")
	}
	resp, sse := openStream(t, ctx, srv.URL, http.Header{"Authorization": {"Bearer s3cret"}})
	if resp.StatusCode != 200 {
		t.Fatalf("stream with the token: %d", resp.StatusCode)
	}
	sse.nextSnapshot(t)

	for path, want := range map[string]string{
		webui.Prefix:               "text/html",
		webui.Prefix + "app.js":    "text/javascript",
		webui.Prefix + "style.css": "text/css",
	} {
		code, ct, _ := get(t, srv.URL+path)
		if code != 200 || !strings.HasPrefix(ct, want) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, code, ct, want)
		}
	}
	if code, _, _ := get(t, srv.URL+webui.Prefix+"nothing.js"); code != 404 {
		t.Errorf("GET a missing asset: %d", code)
	}
}

func get(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// The optional parts reach the page when there is something to show:
// the coordination among Vigil instances (absent for a single Vigil), the
// clones (absent when this Vigil does not clone) and the sharded listener
// with its moves (absent when none is configured).
func TestStreamOptionalParts(t *testing.T) {
	servers := func() any { return []server{} }
	for _, tc := range []struct {
		name string
		src  webui.Source
		want string
		not  bool
	}{
		{"several instances", webui.Source{Servers: servers, Coordination: func() any {
			return json.RawMessage(`{"enabled":true,"lease":{"instance":"vigil1","lease":"held"},"clusters":{"c":{"leader":"vigil1","acting":true,"writes":"allowed"}}}`)
		}}, `"coordination":{"enabled":true,"lease":{"instance":"vigil1"`, false},
		{"single Vigil", webui.Source{Servers: servers, Coordination: func() any { return nil }}, `"coordination"`, true},
		{"clones", webui.Source{Servers: servers, Clones: func() any {
			return map[string]any{"running": []map[string]any{{"id": 1, "target": "db3", "phase": "streaming", "bytes": 10, "total_bytes": 40}}, "finished": []any{}}
		}}, `"clones":{"finished":[],"running":[{"bytes":10,"id":1,"phase":"streaming","target":"db3","total_bytes":40}]}`, false},
		{"no cloner", webui.Source{Servers: servers, Clones: func() any { return nil }}, `"clones"`, true},
		{"shards", webui.Source{Servers: servers, Shards: func() any {
			return map[string]any{"listener": map[string]any{"version": 3, "schemas": []map[string]any{{"name": "tenant1", "cluster": "east"}}},
				"moves": map[string]any{"last": map[string]any{"kind": "move", "schema": "tenant1", "state": "done"}}}
		}}, `"shards":{"listener":{"schemas":[{"cluster":"east","name":"tenant1"}],"version":3},"moves":{"last":{"kind":"move","schema":"tenant1","state":"done"}}}`, false},
		{"no sharded listener", webui.Source{Servers: servers, Shards: func() any { return nil }}, `"shards"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(webui.Handler(tc.src, webui.Options{}))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if data := firstSnapshot(t, ctx, srv.URL); strings.Contains(data, tc.want) == tc.not {
				t.Fatalf("snapshot (want %q present=%v): %s", tc.want, !tc.not, data)
			}
		})
	}
}
