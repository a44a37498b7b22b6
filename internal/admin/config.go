package admin

import (
	"io"
	"net/http"
)

// ConfigController is the configuration part of the daemon's API: the
// running config with secrets redacted, and validation of a candidate file.
type ConfigController interface {
	// RunningConfig is the config in force, passwords and tokens
	// replaced by "<redacted>".
	RunningConfig() any
	// ValidateConfig checks a candidate config (YAML) without applying it.
	ValidateConfig(data []byte) error
}

func (s *Server) configRoutes() {
	cc, ok := s.ctl.(ConfigController)
	if !ok {
		return
	}
	s.mux.Handle("GET /api/v1/config", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, cc.RunningConfig())
	})))
	s.mux.Handle("POST /api/v1/config/validate", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			writeErr(w, &Error{400, "reading the body: " + err.Error()})
			return
		}
		if err := cc.ValidateConfig(data); err != nil {
			writeJSON(w, 422, map[string]any{"ok": false, "error": err.Error()})
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true})
	})))
}

// ClusterView is one cluster as GET /api/v1/clusters shows it.
type ClusterView struct {
	Name     string   `json:"name"`
	Type     string   `json:"type"`
	Listen   string   `json:"listen"`
	Writer   string   `json:"writer"`
	Term     uint64   `json:"term"`
	Servers  []string `json:"servers"`
	Sessions int      `json:"sessions"`
	Queries  int64    `json:"queries"`
	// Operation is the failover or switchover running now, if any.
	Operation string `json:"operation,omitempty"`
	// WriterReason says why there is no writer.
	WriterReason string `json:"writer_reason,omitempty"`
}

// ClusterLister lists clusters.
type ClusterLister interface {
	Clusters() []ClusterView
}

func (s *Server) clusterRoutes() {
	cl, ok := s.ctl.(ClusterLister)
	if !ok {
		return
	}
	s.mux.Handle("GET /api/v1/clusters", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, cl.Clusters())
	})))
}
