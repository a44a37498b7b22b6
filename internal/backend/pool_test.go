package backend

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// fakeDialer stands in for mysqlproto.Dial (Options.Dial): each dial
// opens an in-memory connection whose server end answers every command
// with OK (or, with initErr, the first one with that error), after the
// handshake a real dial would have done.
type fakeDialer struct {
	mu      sync.Mutex
	dials   int
	fail    error         // returned by every dial while set
	initErr []byte        // the answer to the connection's first command when set
	block   chan struct{} // when set, a dial waits for it to close (or for its ctx)
	nextID  uint32
	servers []net.Conn
	users   []string // the server user each dial logged in as
}

func (f *fakeDialer) dial(ctx context.Context, cfg *mysqlproto.DialConfig) (*mysqlproto.Conn, *mysqlproto.Greeting, error) {
	f.mu.Lock()
	f.dials++
	f.users = append(f.users, cfg.User)
	fail, block, initErr := f.fail, f.block, f.initErr
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, nil, fail
	}
	cl, srv := net.Pipe()
	f.mu.Lock()
	f.nextID++
	id := f.nextID
	f.servers = append(f.servers, srv)
	f.mu.Unlock()
	go serveOK(srv, initErr)
	return mysqlproto.NewConn(cl), &mysqlproto.Greeting{ServerVersion: "10.11.6-MariaDB", ConnectionID: id,
		Capabilities: mysqlproto.CapabilityClientSessionTrack}, nil
}

// serveOK answers each command with OK until the client closes the
// connection; first, when set, answers the first command instead.
func serveOK(nc net.Conn, first []byte) {
	defer nc.Close()
	mc := mysqlproto.NewConn(nc)
	for {
		mc.Seq = 0
		p, err := mc.ReadPacket()
		if err != nil || len(p) > 0 && p[0] == 0x01 { // COM_QUIT
			return
		}
		reply := okPayload
		if first != nil {
			reply, first = first, nil
		}
		mc.Seq = 1
		if mc.WritePacket(reply) != nil || mc.Flush() != nil {
			return
		}
	}
}

func (f *fakeDialer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials
}

func (f *fakeDialer) set(fn func(f *fakeDialer)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func allowAll(user string) (string, string, bool) { return "srv_" + user, "pw", true }

// fakePool is a pool whose dials go to f.
func fakePool(t *testing.T, opts Options) (*Pool, *fakeDialer) {
	t.Helper()
	f := &fakeDialer{}
	opts.Dial = f.dial
	if opts.Credentials == nil {
		opts.Credentials = allowAll
	}
	p := NewPool("s1", "10.0.0.1:3306", 0, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() {
		p.Close()
		f.mu.Lock()
		for _, s := range f.servers {
			s.Close()
		}
		f.mu.Unlock()
	})
	return p, f
}

func get(t *testing.T, p *Pool, key Key) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.Get(ctx, key, nil)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return c
}

func wantStats(t *testing.T, p *Pool, open, idle int) {
	t.Helper()
	if st := p.Stats(); st.Open != open || st.Idle != idle || st.InUse != open-idle {
		t.Fatalf("stats %+v, want open %d idle %d", st, open, idle)
	}
}

// waitWaiters waits until n goroutines wait in Get for a connection.
func waitWaiters(t *testing.T, p *Pool, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		p.mu.Lock()
		w := p.waiters
		p.mu.Unlock()
		if w == n {
			return
		}
	}
	t.Fatalf("no %d waiters in Get", n)
}

func TestGetDialsThenReusesIdle(t *testing.T) {
	p, f := fakePool(t, Options{})
	key := Key{User: "app"}
	c := get(t, p, key)
	if f.count() != 1 || f.users[0] != "srv_app" {
		t.Fatalf("dials %d as %v; want one, as the backend user", f.count(), f.users)
	}
	if c.ID != 1 || c.Server != "s1" || !c.SessionTrack || c.MySQL {
		t.Fatalf("connection %+v", c)
	}
	if ids := p.ConnIDs(); !slices.Equal(ids, []uint32{1}) {
		t.Fatalf("ConnIDs %v", ids)
	}
	wantStats(t, p, 1, 0)
	p.Put(c)
	wantStats(t, p, 1, 1)
	if again := get(t, p, key); again != c {
		t.Fatal("Get dialed instead of lending the idle connection")
	}
	if f.count() != 1 {
		t.Fatalf("%d dials", f.count())
	}
	// Another key (user) never gets it: a connection of its own.
	other := get(t, p, Key{User: "report"})
	if other == c || f.count() != 2 {
		t.Fatal("a connection was shared between keys")
	}
	p.Put(c)
	p.Put(other)
	wantStats(t, p, 2, 2)
	if st := p.Stats(); st.Dials != 2 || st.DialErrors != 0 || st.Waits != 0 {
		t.Fatalf("counters %+v", st)
	}
}

func TestGetFullWaitsThenTimesOut(t *testing.T) {
	p, f := fakePool(t, Options{MaxOpen: 2})
	a, b := get(t, p, Key{}), get(t, p, Key{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := p.Get(ctx, Key{}, nil)
	if c != nil || !errors.Is(err, ErrPoolExhausted) || !strings.Contains(err.Error(), "2 of 2 connections to s1 in use") {
		t.Fatalf("Get on a full pool = %v, %v", c, err)
	}
	if time.Since(start) < 40*time.Millisecond {
		t.Fatal("Get gave up before its context ended")
	}
	if f.count() != 2 || p.Stats().Waits != 1 {
		t.Fatalf("dials %d, stats %+v", f.count(), p.Stats())
	}
	p.mu.Lock()
	w := p.waiters
	p.mu.Unlock()
	if w != 0 {
		t.Fatalf("%d waiters left after the timeout", w)
	}
	p.Put(a)
	p.Put(b)
	wantStats(t, p, 2, 2)
}

func TestGetWaiterGetsReturnedConnection(t *testing.T) {
	p, f := fakePool(t, Options{MaxOpen: 1})
	c := get(t, p, Key{})
	got := make(chan *Conn)
	go func() { got <- get(t, p, Key{}) }()
	waitWaiters(t, p, 1)
	p.Put(c)
	if w := <-got; w != c {
		t.Fatal("the waiter did not get the connection given back")
	}
	if f.count() != 1 {
		t.Fatalf("%d dials", f.count())
	}
	// A slot freed by a discard wakes a waiter too, which dials.
	go func() { got <- get(t, p, Key{}) }()
	waitWaiters(t, p, 1)
	p.Discard(c)
	w := <-got
	if w == c || f.count() != 2 {
		t.Fatalf("after a discard the waiter got %p (dials %d)", w, f.count())
	}
	p.Put(w)
}

func TestGetWaitCancelled(t *testing.T) {
	p, _ := fakePool(t, Options{MaxOpen: 1})
	c := get(t, p, Key{})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() { _, err := p.Get(ctx, Key{}, nil); errc <- err }()
	waitWaiters(t, p, 1)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrPoolExhausted) {
			t.Fatalf("cancelled Get: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Get did not return when its context was cancelled")
	}
	p.Put(c)
	wantStats(t, p, 1, 1)
}

func TestDialFailureFreesSlot(t *testing.T) {
	p, f := fakePool(t, Options{MaxOpen: 1})
	refused := errors.New("connection refused")
	f.set(func(f *fakeDialer) { f.fail = refused })
	for range 3 { // more failures than slots: none leaks one
		c, err := p.Get(context.Background(), Key{}, nil)
		if c != nil || !errors.Is(err, refused) || !strings.Contains(err.Error(), "connecting to s1 (10.0.0.1:3306)") {
			t.Fatalf("Get = %v, %v", c, err)
		}
	}
	wantStats(t, p, 0, 0)
	if st := p.Stats(); st.Dials != 3 || st.DialErrors != 3 {
		t.Fatalf("counters %+v", st)
	}
	f.set(func(f *fakeDialer) { f.fail = nil })
	p.Put(get(t, p, Key{}))
	wantStats(t, p, 1, 1)
}

// A dial cut short by the caller's context frees its slot.
func TestDialCancelledFreesSlot(t *testing.T) {
	p, f := fakePool(t, Options{MaxOpen: 1})
	f.set(func(f *fakeDialer) { f.block = make(chan struct{}) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if c, err := p.Get(ctx, Key{}, nil); c != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get = %v, %v", c, err)
	}
	wantStats(t, p, 0, 0)
}

func TestDialWithoutCredentials(t *testing.T) {
	p, f := fakePool(t, Options{Credentials: func(string) (string, string, bool) { return "", "", false }})
	c, err := p.Get(context.Background(), Key{User: "nobody"}, nil)
	if c != nil || err == nil || !strings.Contains(err.Error(), `no server credentials for user "nobody"`) {
		t.Fatalf("Get = %v, %v", c, err)
	}
	if f.count() != 0 {
		t.Fatal("dialed without credentials")
	}
	wantStats(t, p, 0, 0)
	if st := p.Stats(); st.DialErrors != 1 {
		t.Fatalf("counters %+v", st)
	}
}

// The session setup the pool runs on a new connection fails: the
// connection is closed, its slot freed, and the error says which step.
func TestDialInitFails(t *testing.T) {
	p, f := fakePool(t, Options{})
	f.set(func(f *fakeDialer) { f.initErr = errPayload(1227) })
	c, err := p.Get(context.Background(), Key{}, nil)
	var se *mysqlproto.SQLError
	if c != nil || !errors.As(err, &se) || se.Code != 1227 || !strings.Contains(err.Error(), "preparing connection to s1") {
		t.Fatalf("Get = %v, %v", c, err)
	}
	wantStats(t, p, 0, 0)
	if ids := p.ConnIDs(); len(ids) != 0 {
		t.Fatalf("ConnIDs %v after a failed setup", ids)
	}
	if st := p.Stats(); st.DialErrors != 1 {
		t.Fatalf("counters %+v", st)
	}
}

func TestGetFencedAndClosed(t *testing.T) {
	p, f := fakePool(t, Options{})
	c := get(t, p, Key{})
	p.SetFenced(true)
	if _, err := p.Get(context.Background(), Key{}, nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("Get on a fenced server: %v", err)
	}
	p.Put(c) // a fenced server's connections are closed, not pooled
	wantStats(t, p, 0, 0)
	p.SetFenced(false)
	p.Put(get(t, p, Key{}))
	p.Close()
	if _, err := p.Get(context.Background(), Key{}, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Get on a closed pool: %v", err)
	}
	wantStats(t, p, 0, 0)
	if f.count() != 2 {
		t.Fatalf("%d dials", f.count())
	}
}

// Expired connections are not lent: Get closes one and dials.
func TestGetSkipsExpired(t *testing.T) {
	p, f := fakePool(t, Options{MaxLifetime: time.Minute})
	c := get(t, p, Key{})
	p.Put(c)
	p.mu.Lock()
	c.created = time.Now().Add(-2 * time.Minute)
	p.mu.Unlock()
	n := get(t, p, Key{})
	if n == c || f.count() != 2 {
		t.Fatal("an expired connection was lent")
	}
	p.Put(n)
	wantStats(t, p, 1, 1)
	if ids := p.ConnIDs(); !slices.Equal(ids, []uint32{n.ID}) {
		t.Fatalf("ConnIDs %v, want [%d]", ids, n.ID)
	}
}

// A full pool closes an idle connection of another key to make room;
// the closed connection leaves ConnIDs (what a returning fenced server's
// connections are killed by) like any other.
func TestGetFullClosesIdleOfOtherKey(t *testing.T) {
	p, f := fakePool(t, Options{MaxOpen: 1})
	a := get(t, p, Key{User: "a"})
	p.Put(a)
	b := get(t, p, Key{User: "b"})
	if b == a || f.count() != 2 {
		t.Fatal("no new connection for the other key")
	}
	wantStats(t, p, 1, 0)
	if ids := p.ConnIDs(); !slices.Equal(ids, []uint32{b.ID}) {
		t.Fatalf("ConnIDs %v, want only the open connection's [%d]", ids, b.ID)
	}
	p.Put(b)
}

func TestSweep(t *testing.T) {
	p, f := fakePool(t, Options{IdleTimeout: time.Minute, MaxLifetime: time.Hour})
	old, idle, fresh := get(t, p, Key{}), get(t, p, Key{}), get(t, p, Key{})
	for _, c := range []*Conn{old, idle, fresh} {
		p.Put(c)
	}
	p.mu.Lock()
	old.created = time.Now().Add(-2 * time.Hour)
	idle.lastUsed = time.Now().Add(-2 * time.Minute)
	p.mu.Unlock()
	p.sweep(context.Background())
	wantStats(t, p, 1, 1)
	if ids := p.ConnIDs(); !slices.Equal(ids, []uint32{fresh.ID}) {
		t.Fatalf("ConnIDs %v, want [%d]", ids, fresh.ID)
	}
	if got := get(t, p, Key{}); got != fresh {
		t.Fatal("the sweep closed the fresh connection")
	}
	if f.count() != 3 {
		t.Fatalf("%d dials", f.count())
	}
	p.Put(fresh)
}

func TestSweepKeepsMinIdle(t *testing.T) {
	p, f := fakePool(t, Options{MinIdle: 3, MaxOpen: 4, IdleTimeout: time.Minute})
	k := Key{User: "app"}
	c := get(t, p, k) // the key is in use now
	p.sweep(context.Background())
	wantStats(t, p, 4, 3) // three idle besides the lent one
	p.Put(c)
	p.sweep(context.Background()) // enough idle: nothing dialed
	if f.count() != 4 {
		t.Fatalf("%d dials", f.count())
	}
	// max_open bounds min_idle: a second key gets what is left (none).
	p.Put(get(t, p, Key{User: "other"})) // closes one of app's idle to make room
	p.sweep(context.Background())
	if st := p.Stats(); st.Open > 4 {
		t.Fatalf("min_idle went past max_open: %+v", st)
	}

	// Failed min_idle dials free their slots.
	q, g := fakePool(t, Options{MinIdle: 2, IdleTimeout: time.Minute})
	q.Put(get(t, q, k))
	g.set(func(f *fakeDialer) { f.fail = errors.New("refused") })
	q.sweep(context.Background())
	wantStats(t, q, 1, 1)
	if st := q.Stats(); st.DialErrors != 1 {
		t.Fatalf("counters %+v", st)
	}

	// A key unused for idle_timeout is forgotten: no more fills for it.
	q.mu.Lock()
	q.keys[k] = time.Now().Add(-2 * time.Minute)
	q.mu.Unlock()
	g.set(func(f *fakeDialer) { f.fail = nil })
	before := g.count()
	q.sweep(context.Background())
	if g.count() != before {
		t.Fatal("the sweep filled a key nobody used for idle_timeout")
	}
}

func TestMaintainStopsWithContext(t *testing.T) {
	p, _ := fakePool(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Maintain(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Maintain did not return when its context ended")
	}
}

// Many sessions share a small pool: never more than max_open open, no
// connection lent twice at once, every slot accounted for at the end.
func TestConcurrentGetPut(t *testing.T) {
	const maxOpen, workers, rounds = 3, 16, 100
	p, _ := fakePool(t, Options{MaxOpen: maxOpen})
	var inUse sync.Map
	var lent atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			key := Key{User: []string{"a", "b"}[w%2]}
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				c, err := p.Get(ctx, key, nil)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if _, dup := inUse.LoadOrStore(c, true); dup {
					t.Error("a connection was lent twice at once")
				}
				if n := lent.Add(1); n > maxOpen {
					t.Errorf("%d connections lent at once, max_open %d", n, maxOpen)
				}
				if st := p.Stats(); st.Open > maxOpen {
					t.Errorf("%d open, max_open %d", st.Open, maxOpen)
				}
				lent.Add(-1)
				inUse.Delete(c)
				if w%5 == 0 {
					p.Discard(c)
				} else {
					p.Put(c)
				}
			}
		})
	}
	wg.Wait()
	if st := p.Stats(); st.InUse != 0 || st.Open != st.Idle || st.Open > maxOpen {
		t.Fatalf("after the run: %+v", st)
	}
	p.mu.Lock()
	w := p.waiters
	p.mu.Unlock()
	if w != 0 {
		t.Fatalf("%d waiters counted with nobody waiting", w)
	}
}

// A waiter whose context ends just as a connection is given back (both
// ready when it wakes) must not be uncounted twice: the wake-up already
// uncounted it. Counted below zero, the next waiter is not woken by a
// Put and times out with a connection idle in the pool.
func TestWaiterCancelledAsWokenKeepsCount(t *testing.T) {
	p, _ := fakePool(t, Options{MaxOpen: 1})
	c := get(t, p, Key{})
	for i := 0; i < 200; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan *Conn)
		go func() {
			w, _ := p.Get(ctx, Key{}, nil)
			got <- w
		}()
		waitWaiters(t, p, 1)
		// Both ready before the waiter runs again.
		p.mu.Lock()
		cancel()
		p.idle[c.key] = append(p.idle[c.key], c)
		p.wakeLocked()
		p.mu.Unlock()
		if w := <-got; w != nil {
			c = w // it took the connection: lend it again
		} else if c = p.TryGet(Key{}, nil); c == nil {
			t.Fatal("the connection left the pool")
		}
		p.mu.Lock()
		n := p.waiters
		p.mu.Unlock()
		if n != 0 {
			t.Fatalf("round %d: %d waiters counted with nobody waiting", i, n)
		}
	}
	// And a waiter is still woken by a Put.
	got := make(chan *Conn)
	go func() { got <- get(t, p, Key{}) }()
	waitWaiters(t, p, 1)
	p.Put(c)
	select {
	case w := <-got:
		p.Put(w)
	case <-time.After(5 * time.Second):
		t.Fatal("a Put did not wake the waiter")
	}
}

// Kill dials a fresh connection (through Options.Dial) as the session's
// server user; a thread that already ended is not an error.
func TestKill(t *testing.T) {
	p, f := fakePool(t, Options{})
	if err := p.Kill(context.Background(), "app", 5, true); err != nil {
		t.Fatal(err)
	}
	if f.count() != 1 || f.users[0] != "srv_app" {
		t.Fatalf("dials %d as %v", f.count(), f.users)
	}
	f.set(func(f *fakeDialer) {
		f.initErr = mysqlproto.AppendErr(nil, mysqlproto.NewError(1094, "HY000", "Unknown thread id: %d", 5))
	})
	if err := p.Kill(context.Background(), "app", 5, false); err != nil {
		t.Fatalf("killing a thread that ended: %v", err)
	}
	f.set(func(f *fakeDialer) { f.initErr = errPayload(1095) }) // not your thread
	var se *mysqlproto.SQLError
	if err := p.Kill(context.Background(), "app", 5, false); !errors.As(err, &se) || se.Code != 1095 {
		t.Fatalf("Kill = %v, want the server's 1095", err)
	}
	refused := errors.New("refused")
	f.set(func(f *fakeDialer) { f.fail = refused })
	if err := p.Kill(context.Background(), "app", 5, false); !errors.Is(err, refused) {
		t.Fatalf("Kill with the server down = %v", err)
	}
	q, g := fakePool(t, Options{Credentials: func(string) (string, string, bool) { return "", "", false }})
	if err := q.Kill(context.Background(), "nobody", 5, false); err == nil || g.count() != 0 {
		t.Fatalf("Kill without credentials = %v after %d dials", err, g.count())
	}
	wantStats(t, p, 0, 0) // Kill's connections are not the pool's
}

// TestCloseWakesWaiters: a Get waiting for a full pool returns "closed"
// as soon as the pool closes, not when its context ends.
func TestCloseWakesWaiters(t *testing.T) {
	p, _ := fakePool(t, Options{MaxOpen: 1})
	c := get(t, p, Key{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errc := make(chan error)
	go func() { _, err := p.Get(ctx, Key{}, nil); errc <- err }()
	waitWaiters(t, p, 1)
	p.Close()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Fatalf("waiting Get after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Get waiting on a full pool did not return when the pool closed")
	}
	p.Put(c)
}
