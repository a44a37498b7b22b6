// Package coord decides who may act when several Vigil instances serve
// one set of clusters: each instance holds an etcd lease; per cluster one
// instance is elected to run failovers and switchovers; the cluster's
// writer, term and fenced servers live in etcd (the writer record) and
// change only by a transaction conditioned on that election, so the
// record is the fencing token every instance routes by. An instance that
// cannot renew its lease stops routing writes before the lease can have
// expired in etcd (self-fencing), so an instance that another one may
// have replaced never writes to a primary that lost its role.
//
// Without coordination (no etcd configured) none of this runs: a single
// Vigil acts alone, as before.
package coord

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Options configure coordination.
type Options struct {
	Endpoints []string
	// Prefix is where Vigil's keys live (ends with "/").
	Prefix string
	// Instance names this Vigil among the others; unique.
	Instance string
	// LeaseTTL is how long the instance keeps its role without reaching
	// etcd. etcd counts whole seconds (at least 2 here; default: the
	// shortest that rides over an etcd leader election, MinLeaseTTL).
	LeaseTTL time.Duration
	// ElectionTimeout is etcd's --election-timeout (default 1s, etcd's):
	// renewals are timed so that a leader election does not fence.
	ElectionTimeout time.Duration
	// AckTimeout bounds how long an operation waits for every live
	// instance to apply a new writer record; an instance that neither
	// answers nor loses its lease by then fails the step.
	AckTimeout     time.Duration
	User, Password string
	TLS            *tls.Config
	// SourceAddress is the local address etcd connections come from
	// (empty: the system's choice).
	SourceAddress string
	DialTimeout   time.Duration
	// Info is what other instances and operators see of this one.
	Info InstanceInfo
}

// InstanceInfo is an instance's registration.
type InstanceInfo struct {
	Name    string    `json:"name"`
	Admin   string    `json:"admin,omitempty"`
	Proxies []string  `json:"proxies,omitempty"`
	Started time.Time `json:"started"`
	Version string    `json:"version,omitempty"`
}

// WithDefaults fills in unset options.
func (o Options) WithDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "/vigil/"
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	if o.ElectionTimeout <= 0 {
		o.ElectionTimeout = DefaultElectionTimeout
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = MinLeaseTTL(o.ElectionTimeout)
	}
	if o.LeaseTTL < 2*time.Second {
		o.LeaseTTL = 2 * time.Second
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 2*o.LeaseTTL + time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 2 * time.Second
	}
	o.Info.Name = o.Instance
	return o
}

// State is the lease as this instance sees it.
type State struct {
	Instance string `json:"instance"`
	// Lease: held, lost (self-fenced) or connecting.
	Lease string `json:"lease"`
	// LeaseID of the current lease, hex.
	LeaseID string `json:"lease_id,omitempty"`
	// ValidFor is how long the lease is sure to hold without another
	// renewal (negative: expired, writes refused).
	ValidFor time.Duration `json:"valid_for_ns"`
	// LostSince is when it last stopped holding, zero while it holds.
	LostSince *time.Time `json:"lost_since,omitempty"`
	// Instances are the registered instances.
	Instances []InstanceInfo `json:"instances"`
	Endpoints []string       `json:"endpoints"`
}

// Coordinator is one instance's connection to etcd: its lease and its
// clusters.
type Coordinator struct {
	opts Options
	log  *slog.Logger
	cli  *clientv3.Client
	base time.Time

	// cur is the lease and its deadline, replaced whole so that nobody
	// reads one lease's ID with another's deadline.
	cur       atomic.Pointer[leaseView]
	sessions  atomic.Uint64
	lostSince atomic.Int64 // unix nanos, 0 while held

	// stalled (tests): act as a paused process would, no grant and no
	// renewal reaches etcd.
	stalled atomic.Bool
	// onRenewal (tests) sees every renewal attempt's outcome.
	onRenewal func(sent time.Time, took time.Duration, err error)

	// proc is random per process: records it wrote carry it.
	proc string

	mu        sync.Mutex
	clusters  map[string]*Cluster
	instances []InstanceInfo
	newLease  chan struct{} // closed and replaced whenever the lease ID changes
}

// leaseView is the lease as this instance knows it.
type leaseView struct {
	id clientv3.LeaseID // 0: none
	// until: nanoseconds since base until which the lease surely holds
	// in etcd (renewal send time + granted TTL - margin); 0 none.
	until int64
}

// New connects to etcd (lazily: the first lease is taken by Run).
func New(opts Options, log *slog.Logger) (*Coordinator, error) {
	opts = opts.WithDefaults()
	if len(opts.Endpoints) == 0 {
		return nil, errors.New("coordination.etcd.endpoints: at least one etcd endpoint is needed")
	}
	if opts.Instance == "" {
		return nil, errors.New("coordination.instance: every Vigil needs its own name")
	}
	cfg := clientv3.Config{
		Endpoints:            opts.Endpoints,
		DialTimeout:          opts.DialTimeout,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Username:             opts.User,
		Password:             opts.Password,
		TLS:                  opts.TLS,
		Logger:               zap.NewNop(),
		AutoSyncInterval:     0,
	}
	if opts.SourceAddress != "" {
		local := &net.TCPAddr{IP: net.ParseIP(opts.SourceAddress)}
		if local.IP == nil {
			return nil, fmt.Errorf("coordination.etcd.source_address %q is not an IP address", opts.SourceAddress)
		}
		d := net.Dialer{LocalAddr: local, Timeout: opts.DialTimeout}
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	c := &Coordinator{opts: opts, log: log, cli: cli, base: time.Now(), clusters: map[string]*Cluster{}, newLease: make(chan struct{}),
		proc: hex.EncodeToString(rnd[:])}
	c.lostSince.Store(time.Now().UnixNano())
	c.cur.Store(&leaseView{})
	return c, nil
}

// Options returns the options in use.
func (c *Coordinator) Options() Options { return c.opts }

// Close ends the connection to etcd (Run must have returned).
func (c *Coordinator) Close() error { return c.cli.Close() }

func (c *Coordinator) sinceBase() int64 { return int64(time.Since(c.base)) }

// Valid reports whether the lease surely holds now.
func (c *Coordinator) Valid() bool {
	v := c.cur.Load()
	return v.id != 0 && v.until != 0 && c.sinceBase() < v.until
}

// holds reports whether id is the current lease and surely holds now.
func (c *Coordinator) holds(id clientv3.LeaseID) bool {
	v := c.cur.Load()
	return id != 0 && v.id == id && v.until != 0 && c.sinceBase() < v.until
}

// ValidUntil is the monotonic deadline of the lease: writes may be routed
// until then (zero time: not now).
func (c *Coordinator) ValidUntil() time.Time {
	u := c.cur.Load().until
	if u == 0 {
		return time.Time{}
	}
	return c.base.Add(time.Duration(u))
}

func (c *Coordinator) leaseID() clientv3.LeaseID { return c.cur.Load().id }

// setLease makes id (0: none) the current lease, valid until until; a
// change of ID wakes whoever waits on leaseChanged.
func (c *Coordinator) setLease(id clientv3.LeaseID, until int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Swap(&leaseView{id: id, until: until})
	if old.id != id {
		close(c.newLease)
		c.newLease = make(chan struct{})
	}
}

// extend moves the deadline of lease id to until if that is later (a
// renewal's answer; answers may arrive out of order).
func (c *Coordinator) extend(id clientv3.LeaseID, until int64) {
	for {
		v := c.cur.Load()
		if v.id != id || v.until >= until {
			return
		}
		if c.cur.CompareAndSwap(v, &leaseView{id: id, until: until}) {
			return
		}
	}
}

// leaseChanged returns a channel closed at the next change of lease ID
// (a new lease, or none).
func (c *Coordinator) leaseChanged() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newLease
}

func (c *Coordinator) key(parts ...string) string { return c.opts.Prefix + strings.Join(parts, "/") }

// Run keeps the lease (and the instance's registration) until ctx ends;
// a lost lease is replaced by a new one as soon as etcd answers again.
func (c *Coordinator) Run(ctx context.Context) error {
	defer c.revoke()
	ttlSec := int64((c.opts.LeaseTTL + time.Second - 1) / time.Second)
	for ctx.Err() == nil {
		for c.stalled.Load() && ctx.Err() == nil {
			_ = sleepCtx(ctx, 5*time.Millisecond)
		}
		sent := c.sinceBase()
		gctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
		g, err := c.cli.Grant(gctx, ttlSec)
		cancel()
		if err != nil {
			c.log.Warn("coordination: cannot take an etcd lease; writes stay refused until etcd answers: check the etcd endpoints and their quorum",
				"instance", c.opts.Instance, "endpoints", strings.Join(c.opts.Endpoints, ","), "err", err)
			if sleepCtx(ctx, 300*time.Millisecond) != nil {
				break
			}
			continue
		}
		ttl := time.Duration(g.TTL) * time.Second
		if err := c.register(ctx, g.ID); err != nil {
			c.log.Warn("coordination: cannot register in etcd", "instance", c.opts.Instance, "err", err)
			c.revokeID(g.ID)
			if sleepCtx(ctx, 300*time.Millisecond) != nil {
				break
			}
			continue
		}
		tm := LeaseTiming(ttl, c.opts.ElectionTimeout)
		if took := time.Duration(c.sinceBase() - sent); took > tm.RenewEvery {
			// A grant that waited (etcd just came back) is timed from
			// when it was sent: renew at once for a fresh deadline.
			sent = c.sinceBase()
			kctx, cancel := context.WithTimeout(ctx, tm.Attempt)
			r, err := c.cli.KeepAliveOnce(kctx, g.ID)
			cancel()
			if err != nil || r.TTL <= 0 {
				c.revokeID(g.ID)
				continue
			}
			ttl = time.Duration(r.TTL) * time.Second
			tm = LeaseTiming(ttl, c.opts.ElectionTimeout)
		}
		c.setLease(g.ID, sent+int64(ttl-tm.Margin))
		c.lostSince.Store(0)
		c.sessions.Add(1)
		c.log.Info("coordination: lease taken", "instance", c.opts.Instance, "lease", fmt.Sprintf("%x", int64(g.ID)), "ttl", ttl)
		c.keepAlive(ctx, g.ID, tm)
		// No lease; the deadline stays for the API (passed, or cut short
		// when etcd said the lease is gone).
		c.setLease(0, min(c.cur.Load().until, c.sinceBase()))
		if ctx.Err() == nil {
			c.log.Error("coordination: etcd lease lost: this instance refuses writes until it holds a new lease and has caught up with the writer record",
				"instance", c.opts.Instance)
		}
	}
	return nil
}

// keepAlive renews the lease until it is lost or ctx ends. A renewal
// starts every RenewEvery whether or not the ones before were answered
// (at most MaxInFlight unanswered, each bounded by Attempt): the client
// spreads them over every endpoint, so one stuck on a dead member, or on
// a member waiting for a new etcd leader, does not hold up the next, and
// the first answered after an election extends the deadline.
func (c *Coordinator) keepAlive(ctx context.Context, id clientv3.LeaseID, tm Timing) {
	type renewal struct {
		sent int64
		r    *clientv3.LeaseKeepAliveResponse
		err  error
	}
	kctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	results := make(chan renewal)
	inFlight := 0
	t := time.NewTicker(tm.RenewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case res := <-results:
			inFlight--
			switch {
			case res.err == nil && res.r.TTL > 0:
				c.extend(id, res.sent+int64(time.Duration(res.r.TTL)*time.Second-tm.Margin))
				c.lostSince.Store(0)
			case errors.Is(res.err, rpctypes.ErrLeaseNotFound) || res.err == nil:
				c.noteLost()
				return
			}
			continue
		case <-t.C:
		}
		now := c.sinceBase()
		if until := c.cur.Load().until; now >= until {
			c.noteLost()
			// Keep trying this lease until etcd says it is gone: a lease
			// that still exists keeps the election and registrations.
			if now-until > int64(tm.TTL) {
				return
			}
		}
		if c.stalled.Load() || inFlight >= tm.MaxInFlight {
			continue
		}
		inFlight++
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := c.sinceBase()
			actx, acancel := context.WithTimeout(kctx, tm.Attempt)
			r, err := c.cli.KeepAliveOnce(actx, id)
			acancel()
			if c.onRenewal != nil {
				c.onRenewal(c.base.Add(time.Duration(sent)), time.Duration(c.sinceBase()-sent), err)
			}
			select {
			case results <- renewal{sent, r, err}:
			case <-kctx.Done():
			}
		}()
	}
}

func (c *Coordinator) noteLost() {
	if c.lostSince.Load() == 0 {
		c.lostSince.Store(time.Now().UnixNano())
	}
}

func (c *Coordinator) register(ctx context.Context, id clientv3.LeaseID) error {
	info := c.opts.Info
	b, _ := json.Marshal(info)
	pctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	_, err := c.cli.Put(pctx, c.key("instances", c.opts.Instance), string(b), clientv3.WithLease(id))
	return err
}

func (c *Coordinator) revoke() {
	if id := c.leaseID(); id != 0 {
		c.revokeID(id)
	}
	c.setLease(0, 0)
}

func (c *Coordinator) revokeID(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = c.cli.Revoke(ctx, id)
}

// Instances lists the registered instances (live leases).
func (c *Coordinator) Instances(ctx context.Context) ([]InstanceInfo, error) {
	gctx, cancel := context.WithTimeout(ctx, c.opts.LeaseTTL)
	defer cancel()
	r, err := c.cli.Get(gctx, c.key("instances")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []InstanceInfo
	for _, kv := range r.Kvs {
		var in InstanceInfo
		if json.Unmarshal(kv.Value, &in) == nil {
			out = append(out, in)
		}
	}
	c.mu.Lock()
	c.instances = out
	c.mu.Unlock()
	return out, nil
}

// State reports the lease.
func (c *Coordinator) State() State {
	st := State{Instance: c.opts.Instance, Endpoints: c.opts.Endpoints}
	v := c.cur.Load()
	if v.id != 0 {
		st.LeaseID = fmt.Sprintf("%x", int64(v.id))
	}
	if v.until != 0 {
		st.ValidFor = time.Duration(v.until - c.sinceBase())
	}
	switch {
	case c.Valid():
		st.Lease = "held"
	case c.sessions.Load() == 0:
		st.Lease = "connecting"
	default:
		st.Lease = "lost"
	}
	if ls := c.lostSince.Load(); ls != 0 {
		t := time.Unix(0, ls)
		st.LostSince = &t
	}
	c.mu.Lock()
	st.Instances = append([]InstanceInfo(nil), c.instances...)
	c.mu.Unlock()
	return st
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
