package webui

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"time"
)

// Snapshot is one message of the stream: everything the page draws.
type Snapshot struct {
	Time    time.Time `json:"time"`
	Servers any       `json:"servers"`
	Events  any       `json:"events"`
	Digests any       `json:"digests"`
	// Coordination: this instance's view of the other Vigil instances
	// (absent for a single Vigil).
	Coordination any `json:"coordination,omitempty"`
	// Clones: the running and the last finished clones (absent when this
	// Vigil does not clone).
	Clones any `json:"clones,omitempty"`
	// Shards: the sharded listener and its moves (absent when none is
	// configured).
	Shards any `json:"shards,omitempty"`
	// DigestsError says why there are no digests (statistics disabled).
	DigestsError string `json:"digests_error,omitempty"`
}

// writeTimeout bounds one write to a client: a client that stops reading
// ends its stream instead of holding its handler forever.
const writeTimeout = 10 * time.Second

// streamHandler sends Server-Sent Events: a "snapshot" event at once and
// every Interval, and a comment line every Heartbeat. Each client is
// served by its request's goroutine, which returns when the request's
// context ends (client gone, server shutting down) or a write fails.
type streamHandler struct {
	src  Source
	opts Options
}

func (h *streamHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	// Writes have deadlines (below); leave none behind on the connection.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	send := func(chunk []byte) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := w.Write(chunk); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The browser reconnects after this many milliseconds when it uses
	// EventSource; the page's own reader uses its own back-off.
	if !send([]byte("retry: 2000\n\n")) || !send(h.event()) {
		return
	}
	tick := time.NewTicker(h.opts.Interval)
	defer tick.Stop()
	beat := time.NewTicker(h.opts.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if !send(h.event()) {
				return
			}
		case <-beat.C:
			if !send([]byte(": heartbeat\n\n")) {
				return
			}
		}
	}
}

// event encodes the current snapshot as one SSE event. JSON never
// contains a raw newline, so it fits on one data line.
func (h *streamHandler) event() []byte {
	b, err := json.Marshal(h.snapshot())
	if err != nil {
		b, _ = json.Marshal(Snapshot{Time: time.Now(), DigestsError: "encoding the snapshot: " + err.Error()})
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, "event: snapshot\ndata: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

func (h *streamHandler) snapshot() Snapshot {
	s := Snapshot{Time: time.Now().UTC(), Servers: []any{}, Events: []any{}, Digests: []any{}}
	if h.src.Servers != nil {
		if v := h.src.Servers(); !isNil(v) {
			s.Servers = v
		}
	}
	if h.src.Events != nil {
		if v := h.src.Events(h.opts.Events); !isNil(v) {
			s.Events = v
		}
	}
	if h.src.Coordination != nil {
		if v := h.src.Coordination(); !isNil(v) {
			s.Coordination = v
		}
	}
	if h.src.Clones != nil {
		if v := h.src.Clones(); !isNil(v) {
			s.Clones = v
		}
	}
	if h.src.Shards != nil {
		if v := h.src.Shards(); !isNil(v) {
			s.Shards = v
		}
	}
	if h.src.Digests != nil {
		v, err := h.src.Digests(h.opts.Digests)
		if err != nil {
			s.DigestsError = err.Error()
		} else if !isNil(v) {
			s.Digests = v
		}
	}
	return s
}

// isNil reports whether v would encode as JSON null: the page then gets
// an empty list instead.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
