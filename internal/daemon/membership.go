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

// overlayFile, in state_dir, keeps what operators changed through the
// API (`vigil ctl server add|remove`, `set-weight`, `set-state standby`)
// so that a reload of the config file or a restart keeps it. The running
// config is always the file's with the overlay applied (effective):
//   - a removed server stays removed even if the file lists it, until
//     `server add` brings it back;
//   - an added server is used unless the file lists a server of that name
//     (the file's definition wins);
//   - weights and standby flags set by an operator win over the file's.
const overlayFile = "membership.json"

type overlay struct {
	Clusters map[string]*clusterOverlay `json:"clusters"`
}

type clusterOverlay struct {
	Add     []overlayServer `json:"add,omitempty"`
	Remove  []string        `json:"remove,omitempty"`
	Weights map[string]int  `json:"weights,omitempty"`
	Standby map[string]bool `json:"standby,omitempty"`
}

type overlayServer struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Role    string `json:"role,omitempty"`
	Weight  int    `json:"weight,omitempty"`
	TLS     bool   `json:"tls,omitempty"`
	Datadir string `json:"datadir,omitempty"`
	Agent   string `json:"agent,omitempty"`
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

// effective is base (the config file) with the overlay applied, on a
// copy: base is never changed.
func effective(base *config.Config, ov *overlay) (*config.Config, error) {
	data, err := base.Marshal()
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(data)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Clusters {
		cc := &cfg.Clusters[i]
		co := ov.Clusters[cc.Name]
		if co == nil {
			continue
		}
		servers := slices.DeleteFunc(cc.Servers, func(s config.Server) bool { return slices.Contains(co.Remove, s.Name) })
		for _, a := range co.Add {
			if !slices.ContainsFunc(servers, func(s config.Server) bool { return s.Name == a.Name }) {
				servers = append(servers, a.server())
			}
		}
		for j := range servers {
			if w, ok := co.Weights[servers[j].Name]; ok {
				servers[j].Weight = w
			}
			if sb, ok := co.Standby[servers[j].Name]; ok {
				servers[j].Standby = sb
			}
		}
		cc.Servers = servers
	}
	return cfg, nil
}

func (o overlayServer) server() config.Server {
	w := o.Weight
	if w == 0 {
		w = 1
	}
	return config.Server{Name: o.Name, Address: o.Address, Role: o.Role, Weight: w, TLS: o.TLS, Datadir: o.Datadir, Agent: o.Agent}
}

// change applies an operator's change to cluster's overlay: edit checks
// it against the running cluster and changes a copy of the overlay; the
// effective config is applied like a reload, and the overlay is saved
// only once it is. newAddr is the address of a server the change adds
// ("" for none): its greeting is read, with the running servers', before
// the lock is taken (greetings).
func (d *daemon) change(cluster, what, newAddr string, edit func(rt *clusterRuntime, cc config.Cluster, co *clusterOverlay) error) error {
	addrs := serverAddrs(d.running.Load())
	if newAddr != "" {
		addrs = append(addrs, newAddr)
	}
	gs := d.readGreetings(d.ctx, addrs)
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	rt, err := d.cluster(cluster)
	if err != nil {
		return err
	}
	ov, err := readOverlay(d.base.StateDir)
	if err != nil {
		return err
	}
	co := ov.Clusters[rt.name]
	if co == nil {
		co = &clusterOverlay{}
		ov.Clusters[rt.name] = co
	}
	if co.Weights == nil {
		co.Weights = map[string]int{}
	}
	if co.Standby == nil {
		co.Standby = map[string]bool{}
	}
	if err := edit(rt, *rt.cfg.Load(), co); err != nil {
		return &admin.Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	cfg, err := effective(d.base, ov)
	if err != nil {
		return &admin.Error{Status: http.StatusBadRequest, Message: err.Error()}
	}
	if err := d.applyLocked(d.base, cfg, what, gs); err != nil {
		return &admin.Error{Status: http.StatusConflict, Message: err.Error()}
	}
	if err := writeOverlay(d.base.StateDir, ov); err != nil {
		return fmt.Errorf("applied, but not saved for the next restart: %w", err)
	}
	return nil
}

func hasServer(cc config.Cluster, name string) bool {
	return slices.ContainsFunc(cc.Servers, func(s config.Server) bool { return s.Name == name })
}

// AddServer implements admin.MembershipController: the server joins the
// running cluster (OFFLINE_SOFT until Online and caught up).
func (d *daemon) AddServer(_ context.Context, cluster string, s admin.ServerSpec) error {
	if s.Name == "" || s.Address == "" {
		return &admin.Error{Status: http.StatusBadRequest, Message: "a server needs a name and an address (host:port)"}
	}
	return d.change(cluster, fmt.Sprintf("server %s (%s) added by an operator", s.Name, s.Address), s.Address, func(_ *clusterRuntime, cc config.Cluster, co *clusterOverlay) error {
		if hasServer(cc, s.Name) {
			return fmt.Errorf("cluster %s already has a server named %s", cc.Name, s.Name)
		}
		co.Remove = slices.DeleteFunc(co.Remove, func(n string) bool { return n == s.Name })
		co.Add = append(slices.DeleteFunc(co.Add, func(a overlayServer) bool { return a.Name == s.Name }),
			overlayServer{Name: s.Name, Address: s.Address, Role: s.Role, Weight: s.Weight, Agent: s.Agent})
		return nil
	})
}

// RemoveServer implements admin.MembershipController: the server is
// drained (bounded by failover.drain_timeout) and leaves the running
// cluster; the writer cannot be removed.
func (d *daemon) RemoveServer(_ context.Context, cluster, server string) (err error) {
	defer func() {
		if rt, cerr := d.cluster(cluster); err == nil && cerr == nil {
			d.setKeptOut(rt, server, "") // gone: a server added later under its name starts afresh
		}
	}()
	return d.change(cluster, fmt.Sprintf("server %s removed by an operator", server), "", func(_ *clusterRuntime, cc config.Cluster, co *clusterOverlay) error {
		if !hasServer(cc, server) {
			return fmt.Errorf("cluster %s has no server named %s", cc.Name, server)
		}
		if len(cc.Servers) == 1 {
			return fmt.Errorf("%s is the cluster's last server", server)
		}
		co.Add = slices.DeleteFunc(co.Add, func(a overlayServer) bool { return a.Name == server })
		delete(co.Weights, server)
		delete(co.Standby, server)
		if !slices.Contains(co.Remove, server) {
			co.Remove = append(co.Remove, server)
		}
		return nil
	})
}

// SetWeight implements admin.MembershipController: the server's read
// weight (0: no reads; Galera: the writer order) changes at once.
func (d *daemon) SetWeight(_ context.Context, cluster, server string, weight int) error {
	if weight < 0 {
		return &admin.Error{Status: http.StatusBadRequest, Message: "the weight must be 0 or more"}
	}
	return d.change(cluster, fmt.Sprintf("server %s weight set to %d by an operator", server, weight), "", func(_ *clusterRuntime, cc config.Cluster, co *clusterOverlay) error {
		if !hasServer(cc, server) {
			return fmt.Errorf("cluster %s has no server named %s", cc.Name, server)
		}
		co.Weights[server] = weight
		return nil
	})
}

// setStandby makes a server a standby or an ordinary server again.
func (d *daemon) setStandby(cluster, server string, on bool) error {
	what := fmt.Sprintf("server %s made a standby by an operator", server)
	if !on {
		what = fmt.Sprintf("server %s is no longer a standby (set by an operator)", server)
	}
	return d.change(cluster, what, "", func(rt *clusterRuntime, cc config.Cluster, co *clusterOverlay) error {
		if !hasServer(cc, server) {
			return fmt.Errorf("cluster %s has no server named %s", cc.Name, server)
		}
		if w := rt.topo.Load().WriterServer(); on && w != nil && w.Name == server {
			return fmt.Errorf("%s is the writer: switch over to another server before making it a standby", server)
		}
		co.Standby[server] = on
		return nil
	})
}
