package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/coord"
)

// startCoordination connects to etcd when the config asks for it; the
// lease is kept by a goroutine the daemon owns.
func (d *daemon) startCoordination(ctx context.Context, cfg *config.Config) error {
	c := cfg.Coordination
	if !c.Enabled() {
		return nil
	}
	opts, err := coordOptions(cfg)
	if err != nil {
		return err
	}
	co, err := coord.New(opts, d.log)
	if err != nil {
		return err
	}
	d.coord = co
	d.wg.Go(func() {
		_ = co.Run(ctx)
	})
	d.wg.Go(func() {
		// The registered instances, for the API and metrics.
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			_, _ = co.Instances(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	d.log.Info("coordination through etcd", "instance", opts.Instance, "endpoints", opts.Endpoints, "lease_ttl", opts.LeaseTTL,
		"rides_over_etcd_elections_shorter_than", coord.LeaseTiming(opts.LeaseTTL, opts.ElectionTimeout).RideOver)
	return nil
}

func coordOptions(cfg *config.Config) (coord.Options, error) {
	c := cfg.Coordination
	name := c.Instance
	if name == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(cfg.Admin.Listen)
		name = host + ":" + port
	}
	opts := coord.Options{Endpoints: c.Etcd.Endpoints, Prefix: c.Etcd.Prefix, Instance: name,
		LeaseTTL: c.LeaseTTL.Duration, ElectionTimeout: c.Etcd.ElectionTimeout.Duration, AckTimeout: c.AckTimeout.Duration, User: c.Etcd.User, Password: c.Etcd.Password,
		SourceAddress: c.Etcd.SourceAddress, DialTimeout: c.Etcd.DialTimeout.Duration,
		Info: coord.InstanceInfo{Admin: cfg.Admin.Listen, Started: time.Now().UTC()}}
	for _, cc := range cfg.Clusters {
		opts.Info.Proxies = append(opts.Info.Proxies, cc.Name+"="+cc.Listen)
	}
	if t := c.Etcd.TLS; t.CA != "" || t.Cert != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.CA != "" {
			pem, err := os.ReadFile(t.CA)
			if err != nil {
				return opts, fmt.Errorf("coordination.etcd.tls.ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opts, fmt.Errorf("coordination.etcd.tls.ca: no certificate in %s", t.CA)
			}
			tc.RootCAs = pool
		}
		if t.Cert != "" {
			cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
			if err != nil {
				return opts, fmt.Errorf("coordination.etcd.tls: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		opts.TLS = tc
	}
	return opts, nil
}

// coordinate connects a built cluster to coordination: its executor acts
// only while elected and follows the writer record otherwise, and its
// frontend routes writes only while the lease holds and the record is
// applied (refused until then).
func (d *daemon) coordinate(rt *clusterRuntime, cfg *config.Config) {
	if d.coord == nil {
		return
	}
	refuseReads := cfg.Coordination.ReadsWhenFenced == "refuse"
	var cl *coord.Cluster
	cl = d.coord.Cluster(rt.name, coord.Callbacks{
		Apply: rt.exec.ApplyShared,
		Serve: d.serveForwarded(rt),
		WriteDeadline: func(until time.Time) {
			why := cl.State().Writes
			if !until.IsZero() {
				// Shown once the deadline passes without a renewal.
				why = "it could not renew its etcd lease in time (self-fenced until it reaches etcd again and has applied the newest writer record)"
			}
			rt.fe.SetWriteDeadline(until, refuseReads, strings.TrimPrefix(why, "refused: "))
			if until.IsZero() {
				rt.log.Warn("coordination: writes refused (error 7015) until this instance holds its etcd lease and has applied the newest writer record", "instance", cl.Instance())
			}
		},
		Elected: func(acting bool) {
			msg := fmt.Sprintf("instance %s no longer acts for the cluster", cl.Instance())
			if acting {
				msg = fmt.Sprintf("instance %s was elected to act for the cluster (failovers, switchovers, rejoins)", cl.Instance())
			}
			d.journal.add(admin.Event{Time: time.Now(), Cluster: rt.name, Kind: "coordination_leader", Message: msg})
			rt.exec.Kick()
		},
	})
	rt.shared = cl
	rt.exec.SetShared(cl)
	rt.fe.SetWriteDeadline(time.Time{}, refuseReads, "this instance has not joined the other Vigil instances through etcd yet")
}

// serveForwarded runs a request another instance forwarded to this one,
// the acting instance: lifecycle requests here, the rest in the executor.
func (d *daemon) serveForwarded(rt *clusterRuntime) func(ctx context.Context, f coord.Forwarded) (json.RawMessage, bool, error) {
	return func(ctx context.Context, f coord.Forwarded) (json.RawMessage, bool, error) {
		if f.Kind != "lifecycle" {
			return rt.exec.Serve(ctx, f)
		}
		var r admin.CloneRequest
		if err := json.Unmarshal(f.Lifecycle, &r); err != nil {
			return nil, false, fmt.Errorf("forwarded lifecycle request: %w", err)
		}
		// The operation outlives the forwarding: it runs under the
		// daemon's context, as one asked of this instance does.
		res, err := d.Clone(d.ctx, r)
		b, _ := json.Marshal(res)
		var ae *admin.Error
		return b, errors.As(err, &ae) && ae.Status == http.StatusConflict, err
	}
}

// forwardLifecycle sends a lifecycle request to the instance acting for
// rt's cluster and returns its answer.
func (d *daemon) forwardLifecycle(ctx context.Context, rt *clusterRuntime, r admin.CloneRequest) (any, error) {
	body, _ := json.Marshal(r)
	fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := rt.shared.Forward(fctx, coord.Forwarded{Kind: "lifecycle", Lifecycle: body})
	var re *coord.RemoteError
	switch {
	case errors.As(err, &re):
		status := http.StatusBadGateway
		if re.Refused {
			status = http.StatusConflict
		}
		return nil, &admin.Error{Status: status, Message: fmt.Sprintf("%s (answered by the acting instance %s)", re.Msg, re.By)}
	case err != nil:
		return nil, &admin.Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("forwarding to the instance acting for cluster %s (%s): %v", rt.name, orUnknown(rt.leader()), err)}
	}
	return json.RawMessage(out), nil
}

// runCoordination starts a cluster's coordination (with runCluster).
func (rt *clusterRuntime) runCoordination() {
	if rt.shared == nil {
		return
	}
	rt.wg.Go(func() { rt.shared.Run(rt.ctx) })
	// The other instances read this one's view before failing over.
	rt.wg.Go(func() { rt.shared.PublishViews(rt.ctx, rt.exec.ServerViews) })
}

// CoordinationState is what GET /api/v1/coordination shows.
type CoordinationState struct {
	Enabled  bool                          `json:"enabled"`
	Lease    *coord.State                  `json:"lease,omitempty"`
	Clusters map[string]coord.ClusterState `json:"clusters,omitempty"`
}

// Coordination reports the coordination state (admin API).
func (d *daemon) Coordination() json.RawMessage {
	st := CoordinationState{}
	if d.coord != nil {
		st.Enabled = true
		ls := d.coord.State()
		st.Lease = &ls
		st.Clusters = map[string]coord.ClusterState{}
		for name, rt := range d.clusterMap() {
			if rt.shared != nil {
				st.Clusters[name] = rt.shared.State()
			}
		}
	}
	b, _ := json.Marshal(st)
	return b
}

var (
	descCoordLease     = prometheus.NewDesc("vigil_coordination_lease_held", "1 while this instance surely holds its etcd lease (coordination among Vigil instances).", []string{"instance"}, nil)
	descCoordValid     = prometheus.NewDesc("vigil_coordination_lease_valid_seconds", "How long the etcd lease surely holds without another renewal (negative: expired).", []string{"instance"}, nil)
	descCoordInstances = prometheus.NewDesc("vigil_coordination_instances", "Vigil instances registered in etcd, as last read.", nil, nil)
	descCoordLeader    = prometheus.NewDesc("vigil_coordination_acting", "1 when this instance is the one elected to act for the cluster.", []string{"cluster", "instance"}, nil)
	descCoordTerm      = prometheus.NewDesc("vigil_coordination_term", "The writer term of the newest writer record this instance has seen in etcd.", []string{"cluster"}, nil)
	descCoordFenced    = prometheus.NewDesc("vigil_coordination_writes_fenced", "1 while this instance refuses writes (error 7015): lease lost or newest writer record not applied.", []string{"cluster"}, nil)
)

func (m metricsCollector) collectCoordination(ch chan<- prometheus.Metric) {
	co := m.d.coord
	if co == nil {
		return
	}
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	st := co.State()
	gauge(descCoordLease, b2f(st.Lease == "held"), st.Instance)
	gauge(descCoordValid, st.ValidFor.Seconds(), st.Instance)
	gauge(descCoordInstances, float64(len(st.Instances)))
	for name, rt := range m.d.clusterMap() {
		if rt.shared == nil {
			continue
		}
		cs := rt.shared.State()
		gauge(descCoordLeader, b2f(cs.Acting), name, st.Instance)
		if cs.Record != nil {
			gauge(descCoordTerm, float64(cs.Record.Term), name)
		}
		gauge(descCoordFenced, b2f(rt.fe.WritesFenced()), name)
	}
}

// coordinationReloadable: coordination settings need a restart.
func coordinationReloadable(cur, next config.Coordination) error {
	if !reflect.DeepEqual(cur, next) {
		return fmt.Errorf("coordination: changing how this instance joins the others through etcd needs a restart")
	}
	return nil
}
