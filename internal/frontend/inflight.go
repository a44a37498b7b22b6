package frontend

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// inflight is the session's statement in flight and its user as other
// goroutines see them: session listings, another session's KILL, Fence,
// and the watcher that kills a statement whose client went away.
type inflight struct {
	// user, text and start are guarded by mu: the user (for listings
	// and KILL's permission check), the running statement's text
	// (bounded, curTextMax) and when it started.
	mu    sync.Mutex
	user  string
	text  []byte
	start time.Time
	// running is the server connection of the statement in flight, for
	// KILL.
	running atomic.Pointer[backend.Conn]

	watch     *time.Timer
	watchDone chan struct{}
	watchOn   atomic.Bool
	noWatch   bool // LOAD DATA LOCAL reads the client itself
}

// setUser records the session's user ("" for none).
func (f *inflight) setUser(name string) {
	f.mu.Lock()
	f.user = name
	f.mu.Unlock()
}

// userName is the session's user ("" before login).
func (f *inflight) userName() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.user
}

// begin records q, started at start, as the statement in flight.
func (f *inflight) begin(q []byte, start time.Time) {
	f.mu.Lock()
	f.text = append(f.text[:0], q[:min(len(q), curTextMax)]...)
	f.start = start
	f.mu.Unlock()
}

// end records that no statement is in flight.
func (f *inflight) end() {
	f.mu.Lock()
	f.text = f.text[:0]
	f.mu.Unlock()
}

// show fills in what a listing shows of the statement in flight.
func (f *inflight) show(in *SessionInfo) {
	if c := f.running.Load(); c != nil {
		in.Server = c.Server
	}
	f.mu.Lock()
	in.User = f.user
	if len(f.text) > 0 {
		in.Command = string(sqlscan.Mask(nil, f.text, false))
		in.Seconds = time.Since(f.start).Seconds()
	}
	f.mu.Unlock()
}

// Info summarises the session (any goroutine).
func (s *Session) Info() SessionInfo {
	in := SessionInfo{ID: s.id, Client: s.remote}
	s.cur.show(&in)
	return in
}

// setUser changes the session's user (session goroutine only).
func (s *Session) setUser(u *User) {
	s.user = u
	s.userStats = nil
	name := ""
	if u != nil {
		name = u.Name
	}
	s.cur.setUser(name)
}

// watchAfter is how long a statement runs before Vigil starts watching its
// client for a disconnect.
const watchAfter = time.Second

// armWatch starts a timer; if the statement is still running when it
// fires, a goroutine watches the client socket and kills the server-side
// query when the client goes away (a client that vanishes mid-query must
// not leave work running on the server).
func (s *Session) armWatch() {
	if s.cur.watch == nil {
		s.cur.watchDone = make(chan struct{}, 1)
		s.cur.watch = time.AfterFunc(time.Hour, s.watchClient)
	}
	s.cur.watchOn.Store(true)
	s.cur.watch.Reset(watchAfter)
}

func (s *Session) disarmWatch() {
	s.cur.watchOn.Store(false)
	if s.cur.watch.Stop() {
		return // never fired
	}
	// The watcher may be blocked reading the client: unblock and wait.
	_ = s.client.NetConn().SetReadDeadline(time.Unix(1, 0))
	<-s.cur.watchDone
	_ = s.client.NetConn().SetReadDeadline(time.Time{})
}

func (s *Session) watchClient() {
	defer func() { s.cur.watchDone <- struct{}{} }()
	if !s.cur.watchOn.Load() || s.cur.noWatch {
		return
	}
	err := s.client.ReadAhead()
	if err == nil || !s.cur.watchOn.Load() {
		return // data (a pipelined command) or we were stopped
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) && ne.Timeout() {
		return
	}
	if c := s.cur.running.Load(); c != nil {
		s.srv.log.Info("client went away during a statement; killing it on the server", "session", s.id, "server", c.Server)
		s.killRunning(c)
	}
}
