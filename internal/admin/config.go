package admin

import (
	"context"
	"encoding/json"
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

// ServerSpec is a server to add to a running cluster (POST
// /api/v1/servers).
type ServerSpec struct {
	Cluster string `json:"cluster,omitempty"`
	Name    string `json:"name"`
	Address string `json:"address"`
	Role    string `json:"role,omitempty"`
	Weight  int    `json:"weight,omitempty"`
	// Agent is host:port of the server's vigil agent (clone, rebuild).
	Agent string `json:"agent,omitempty"`
}

// MembershipController adds servers to and removes them from running
// clusters. An added server joins OFFLINE_SOFT and is routed once it is
// Online and caught up; a removed one is drained first; the writer cannot
// be removed.
type MembershipController interface {
	AddServer(ctx context.Context, cluster string, s ServerSpec) error
	RemoveServer(ctx context.Context, cluster, server string) error
	// SetWeight sets a server's read weight (0: no reads).
	SetWeight(ctx context.Context, cluster, server string, weight int) error
}

func (s *Server) membershipRoutes() {
	mc, ok := s.ctl.(MembershipController)
	if !ok {
		return
	}
	s.mux.Handle("POST /api/v1/servers", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var spec ServerSpec
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&spec); err != nil {
			writeErr(w, &Error{400, `body must be JSON: {"name": "node4", "address": "127.0.0.1:3310", "weight": 1}`})
			return
		}
		if err := mc.AddServer(r.Context(), spec.Cluster, spec); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "server": spec.Name,
			"message": "added: it joins OFFLINE_SOFT and takes traffic once Online and caught up (vigil ctl events --kind server_joined)"})
	})))
	s.mux.Handle("DELETE /api/v1/servers/{name}", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := mc.RemoveServer(r.Context(), r.URL.Query().Get("cluster"), name); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "server": name, "message": "drained and removed"})
	})))
	s.mux.Handle("POST /api/v1/servers/{name}/weight", s.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Cluster string `json:"cluster"`
			Weight  *int   `json:"weight"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil || body.Weight == nil {
			writeErr(w, &Error{400, `body must be JSON: {"weight": 2}`})
			return
		}
		name := r.PathValue("name")
		if err := mc.SetWeight(r.Context(), body.Cluster, name, *body.Weight); err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, 200, map[string]any{"ok": true, "server": name, "weight": *body.Weight})
	})))
}
