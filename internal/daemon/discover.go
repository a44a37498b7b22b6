package daemon

import (
	"context"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/frontend"
	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// greetings are the servers' greetings by address (nil: no answer). They
// are read before a reload takes reloadMu (readGreetings), so that a
// reload never dials while it holds the lock, nor in the middle of its
// swap: a server that does not answer costs the reload its dial timeout
// before anything changes, not a half-swapped cluster for that long. An
// address that was not read (an operator's change to the state_dir
// overlay landed in between) counts as a server that did not answer.
type greetings map[string]*mysqlproto.Greeting

// serverAddrs are the addresses of every server of cfg's clusters.
func serverAddrs(cfg *config.Config) []string {
	var out []string
	if cfg == nil {
		return nil
	}
	for _, cc := range cfg.Clusters {
		for _, s := range cc.Servers {
			out = append(out, s.Address)
		}
	}
	return out
}

// readGreetings reads each address's greeting (it needs no login), in
// parallel, through d.greet (nil: readGreeting).
func (d *daemon) readGreetings(ctx context.Context, addrs []string) greetings {
	greet := d.greet
	if greet == nil {
		greet = readGreeting
	}
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	got := make([]*mysqlproto.Greeting, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { got[i] = greet(ctx, a) })
	}
	wg.Wait()
	gs := make(greetings, len(addrs))
	for i, a := range addrs {
		gs[a] = got[i]
	}
	return gs
}

// show sets what clients of cc are shown of its servers in o: the version
// is the first answering server's (in configuration order) unless the
// config sets one, and the MariaDB extended capabilities Vigil offers
// clients are those that every answering server offers, within what
// Vigil supports (mysqlproto.MariaDBCapabilities); none when a server is
// MySQL (CLIENT_MYSQL set) or no server answers. A server that is down
// now cannot veto: if it later comes back without them, connections to it
// for clients that negotiated them are refused with an error that says so
// (mysqlproto.Dial), never opened in another shape.
func (gs greetings) show(cc config.Cluster, o *frontend.Options) {
	version, mariadbCaps, collation := "", uint32(mysqlproto.MariaDBCapabilities), byte(0)
	answered := false
	for _, s := range cc.Servers {
		g := gs[s.Address]
		if g == nil {
			continue
		}
		if !answered {
			version = g.ServerVersion + "-vigil"
			collation = g.Collation
		}
		answered = true
		if g.Capabilities&mysqlproto.CapabilityClientLongPassword != 0 {
			mariadbCaps = 0 // MySQL, or a MariaDB older than 10.2
		}
		mariadbCaps &= g.MariaDBCaps
	}
	if !answered {
		version, mariadbCaps, collation = "5.5.5-10.11.0-MariaDB-vigil", 0, 0
	}
	if o.ServerVersion == "" {
		o.ServerVersion = version
	}
	o.MariaDBCaps, o.Collation = mariadbCaps, collation
}

// readGreeting returns a server's greeting, or nil.
func readGreeting(ctx context.Context, addr string) *mysqlproto.Greeting {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var dl net.Dialer
	nc, err := dl.DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	p, err := mysqlproto.NewConn(nc).ReadPacket()
	if err != nil {
		return nil
	}
	g, err := mysqlproto.ParseGreeting(p)
	if err != nil {
		return nil
	}
	return g
}
