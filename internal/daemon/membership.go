package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
)

// overlayFile, in state_dir, keeps the servers operators added or removed
// through the API (`vigil ctl server add|remove`) so that a reload of the
// config file or a restart keeps them: a removed server stays removed
// even if the file lists it, until `server add` brings it back; an added
// server is used unless the file lists a server of that name (the file's
// definition wins).
const overlayFile = "membership.json"

type overlay struct {
	Clusters map[string]*clusterOverlay `json:"clusters"`
}

type clusterOverlay struct {
	Add    []overlayServer `json:"add,omitempty"`
	Remove []string        `json:"remove,omitempty"`
}

type overlayServer struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Role    string `json:"role,omitempty"`
	Weight  int    `json:"weight,omitempty"`
	TLS     bool   `json:"tls,omitempty"`
	Datadir string `json:"datadir,omitempty"`
}

func overlayPath(stateDir string) string { return filepath.Join(stateDir, overlayFile) }

func readOverlay(stateDir string) (*overlay, error) {
	ov := &overlay{Clusters: map[string]*clusterOverlay{}}
	if stateDir == "" {
		return ov, nil
	}
	data, err := os.ReadFile(overlayPath(stateDir))
	if errors.Is(err, os.ErrNotExist) {
		return ov, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", overlayPath(stateDir), err)
	}
	if err := json.Unmarshal(data, ov); err != nil {
		return nil, fmt.Errorf("%s: %w (fix or delete the file: it holds the servers added or removed with vigil ctl server)", overlayPath(stateDir), err)
	}
	if ov.Clusters == nil {
		ov.Clusters = map[string]*clusterOverlay{}
	}
	return ov, nil
}

func writeOverlay(stateDir string, ov *overlay) error {
	data, err := json.MarshalIndent(ov, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	tmp := overlayPath(stateDir) + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, overlayPath(stateDir))
}

// applyOverlay adds and removes the servers of state_dir's overlay to
// and from cfg (see overlayFile).
func applyOverlay(cfg *config.Config) error {
	ov, err := readOverlay(cfg.StateDir)
	if err != nil {
		return err
	}
	for i := range cfg.Clusters {
		cc := &cfg.Clusters[i]
		co := ov.Clusters[cc.Name]
		if co == nil {
			continue
		}
		servers := slices.Clone(cc.Servers)
		servers = slices.DeleteFunc(servers, func(s config.Server) bool { return slices.Contains(co.Remove, s.Name) })
		for _, a := range co.Add {
			if !slices.ContainsFunc(servers, func(s config.Server) bool { return s.Name == a.Name }) {
				servers = append(servers, a.server())
			}
		}
		cc.Servers = servers
	}
	return nil
}

func (o overlayServer) server() config.Server {
	w := o.Weight
	if w == 0 {
		w = 1
	}
	return config.Server{Name: o.Name, Address: o.Address, Role: o.Role, Weight: w, TLS: o.TLS, Datadir: o.Datadir}
}

// withServers is the running config with cluster's server list changed
// by edit, parsed again from YAML so that defaults and validation are
// exactly those of a config file.
func (d *daemon) withServers(cluster string, edit func([]config.Server) ([]config.Server, error)) (*config.Config, string, error) {
	cur := d.running.Load()
	rt, err := d.cluster(cluster)
	if err != nil {
		return nil, "", err
	}
	next := *cur
	next.Clusters = slices.Clone(cur.Clusters)
	for i := range next.Clusters {
		if next.Clusters[i].Name != rt.name {
			continue
		}
		servers, err := edit(slices.Clone(next.Clusters[i].Servers))
		if err != nil {
			return nil, "", &admin.Error{Status: http.StatusBadRequest, Message: err.Error()}
		}
		next.Clusters[i].Servers = servers
	}
	data, err := next.Marshal()
	if err != nil {
		return nil, "", err
	}
	parsed, err := config.Parse(data)
	if err != nil {
		return nil, "", &admin.Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	return parsed, rt.name, nil
}

// AddServer implements admin.MembershipController: the server joins the
// running cluster (OFFLINE_SOFT until Online and caught up) and is kept
// in state_dir's overlay.
func (d *daemon) AddServer(_ context.Context, cluster string, s admin.ServerSpec) error {
	if s.Name == "" || s.Address == "" {
		return &admin.Error{Status: http.StatusBadRequest, Message: "a server needs a name and an address (host:port)"}
	}
	cfg, name, err := d.withServers(cluster, func(ss []config.Server) ([]config.Server, error) {
		if slices.ContainsFunc(ss, func(x config.Server) bool { return x.Name == s.Name }) {
			return nil, fmt.Errorf("cluster already has a server named %s", s.Name)
		}
		return append(ss, overlayServer{Name: s.Name, Address: s.Address, Role: s.Role, Weight: s.Weight}.server()), nil
	})
	if err != nil {
		return err
	}
	if err := d.apply(cfg, fmt.Sprintf("server %s (%s) added to cluster %s by an operator", s.Name, s.Address, name)); err != nil {
		return &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	return d.editOverlay(cfg.StateDir, name, func(co *clusterOverlay) {
		co.Remove = slices.DeleteFunc(co.Remove, func(n string) bool { return n == s.Name })
		co.Add = append(slices.DeleteFunc(co.Add, func(a overlayServer) bool { return a.Name == s.Name }),
			overlayServer{Name: s.Name, Address: s.Address, Role: s.Role, Weight: s.Weight})
	})
}

// RemoveServer implements admin.MembershipController: the server is
// drained (bounded by failover.drain_timeout) and leaves the running
// cluster; the writer cannot be removed.
func (d *daemon) RemoveServer(_ context.Context, cluster, server string) error {
	cfg, name, err := d.withServers(cluster, func(ss []config.Server) ([]config.Server, error) {
		n := len(ss)
		ss = slices.DeleteFunc(ss, func(x config.Server) bool { return x.Name == server })
		if len(ss) == n {
			return nil, fmt.Errorf("no server named %s", server)
		}
		if len(ss) == 0 {
			return nil, fmt.Errorf("%s is the cluster's last server", server)
		}
		return ss, nil
	})
	if err != nil {
		return err
	}
	if err := d.apply(cfg, fmt.Sprintf("server %s removed from cluster %s by an operator", server, name)); err != nil {
		return &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	return d.editOverlay(cfg.StateDir, name, func(co *clusterOverlay) {
		co.Add = slices.DeleteFunc(co.Add, func(a overlayServer) bool { return a.Name == server })
		if !slices.Contains(co.Remove, server) {
			co.Remove = append(co.Remove, server)
		}
	})
}

func (d *daemon) editOverlay(stateDir, cluster string, edit func(*clusterOverlay)) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	ov, err := readOverlay(stateDir)
	if err != nil {
		return err
	}
	co := ov.Clusters[cluster]
	if co == nil {
		co = &clusterOverlay{}
		ov.Clusters[cluster] = co
	}
	edit(co)
	if err := writeOverlay(stateDir, ov); err != nil {
		return fmt.Errorf("applied, but not saved for the next restart: %w", err)
	}
	return nil
}
