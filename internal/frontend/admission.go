package frontend

import "io"

// Admission before login (issue 25): the table of connections that have
// not logged in yet. When it is full, a new connection is not refused:
// the address holding the most connections that are still handshaking
// (greeted, login not decided) loses its oldest one, so under pressure
// every address converges to an equal share and a new client, whose
// connection is the youngest and whose address holds few, logs in. An
// address at max_unauthenticated_per_host makes room among its own. See
// docs/security.md ("Admission before login") and docs/design.md.
//
// Pure: no clock (a sequence number orders connections), no I/O (the
// caller closes the victim admit returns). Not safe for concurrent use;
// LoginGuard holds its lock around every call.

// admitStage is where a connection stands in its login.
type admitStage uint8

const (
	// stageHandshake: greeted, the login not decided yet (silent, half
	// sent, in an auth switch): evictable.
	stageHandshake admitStage = iota
	// stageWait: a failed login waiting out its throttle delay:
	// evictable, but its address stays charged until the wait ends (the
	// throttle's bound of guesses per address).
	stageWait
	// stageCheck: the password was right and Vigil is asking the
	// servers (checkLogin): not evictable.
	stageCheck
	// stageGone: released, or evicted from the handshake.
	stageGone
	// stageEvictedWait: evicted during its wait, its address still
	// charged until release.
	stageEvictedWait
)

// admission is one connection in the table.
type admission struct {
	host       *admitHost
	conn       io.Closer
	seq        uint64
	stage      admitStage
	prev, next *admission // in its host's list of its stage
}

// admitList is a FIFO of admissions (oldest at head), intrusive.
type admitList struct {
	head, tail *admission
	n          int
}

func (l *admitList) push(a *admission) {
	a.prev, a.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = a
	} else {
		l.head = a
	}
	l.tail = a
	l.n++
}

func (l *admitList) remove(a *admission) {
	if a.prev != nil {
		a.prev.next = a.next
	} else {
		l.head = a.next
	}
	if a.next != nil {
		a.next.prev = a.prev
	} else {
		l.tail = a.prev
	}
	a.prev, a.next = nil, nil
	l.n--
}

// admitHost is one client address's part of the table.
type admitHost struct {
	name string
	// charged: its connections in the table, plus those evicted during
	// a throttle wait that has not ended (max_unauthenticated_per_host
	// bounds this).
	charged int
	hand    admitList // stageHandshake, oldest first
	wait    admitList // stageWait, oldest first
}

func (h *admitHost) evictable() int { return h.hand.n + h.wait.n }

// oldest is its oldest evictable admission (handshakes before waits:
// evicting a wait frees no share of the address).
func (h *admitHost) oldest() *admission {
	if h.hand.head != nil {
		return h.hand.head
	}
	return h.wait.head
}

// admitTable holds every connection that has not logged in yet.
type admitTable struct {
	live  int // in the table (max_unauthenticated_connections bounds this)
	hosts map[string]*admitHost
	seq   uint64
}

func newAdmitTable() *admitTable { return &admitTable{hosts: map[string]*admitHost{}} }

// refusal says which bound refused a connection.
type refusal uint8

const (
	admitted refusal = iota
	refusedTotal
	refusedPerHost
)

// admit enters a connection from host, closed by conn, with the bounds
// maxTotal and maxPerHost (0: none). It returns the new admission and
// the one evicted to make room (nil if none; the caller closes its conn
// outside the lock), or why it refused: the address is at maxPerHost
// with none of its own still handshaking, or the table is full with
// nothing evictable.
func (t *admitTable) admit(host string, conn io.Closer, maxTotal, maxPerHost int) (a, victim *admission, why refusal) {
	h := t.hosts[host]
	if maxPerHost > 0 && h != nil && h.charged >= maxPerHost {
		// Its own oldest handshake makes room; a wait would not (its
		// address stays charged).
		if h.hand.head == nil {
			return nil, nil, refusedPerHost
		}
		victim = h.hand.head
		t.evict(victim)
	}
	// One eviction at most: after one of its own made room the table
	// does not grow, even if a reload lowered maxTotal below it.
	if maxTotal > 0 && t.live >= maxTotal && victim == nil {
		if victim = t.victim(host); victim == nil {
			return nil, nil, refusedTotal
		}
		t.evict(victim)
	}
	// An eviction may have emptied (and dropped) the address's entry.
	if h = t.hosts[host]; h == nil {
		h = &admitHost{name: host}
		t.hosts[host] = h
	}
	t.seq++
	a = &admission{host: h, conn: conn, seq: t.seq}
	h.hand.push(a)
	h.charged++
	t.live++
	return a, victim, admitted
}

// victim picks whom a new connection from host evicts from a full
// table: the oldest evictable connection of the address holding the
// most evictable ones, the new one counted with its address's; ties go
// to the new connection's own address, then to the address whose oldest
// is the oldest. nil if nothing is evictable.
func (t *admitTable) victim(host string) *admission {
	var best *admitHost
	bestScore := 0
	for _, h := range t.hosts {
		e := h.evictable()
		if e == 0 {
			continue
		}
		score := e
		if h.name == host {
			score++
		}
		switch {
		case best == nil || score > bestScore:
		case score < bestScore || best.name == host:
			continue
		case h.name != host && h.oldest().seq > best.oldest().seq:
			continue
		}
		best, bestScore = h, score
	}
	if best == nil {
		return nil
	}
	return best.oldest()
}

// evict takes a out of the table.
func (t *admitTable) evict(a *admission) {
	h := a.host
	t.live--
	switch a.stage {
	case stageHandshake:
		h.hand.remove(a)
		a.stage = stageGone
		t.uncharge(h)
	case stageWait:
		h.wait.remove(a)
		a.stage = stageEvictedWait
	}
}

// setStage moves a forward, from handshake to wait or check (a login
// never goes back); nothing for a connection already evicted or
// released. It reports whether a is still in the table.
func (t *admitTable) setStage(a *admission, to admitStage) bool {
	if a.stage >= stageGone {
		return false
	}
	if to <= a.stage || to >= stageGone {
		return true
	}
	t.unlist(a)
	a.stage = to
	if to == stageWait {
		a.host.wait.push(a)
	}
	return true
}

func (t *admitTable) unlist(a *admission) {
	switch a.stage {
	case stageHandshake:
		a.host.hand.remove(a)
	case stageWait:
		a.host.wait.remove(a)
	}
}

// release takes a out for good (logged in, failed, hung up); twice is
// once.
func (t *admitTable) release(a *admission) {
	switch a.stage {
	case stageGone:
		return
	case stageEvictedWait:
	default:
		t.unlist(a)
		t.live--
	}
	a.stage = stageGone
	t.uncharge(a.host)
}

func (t *admitTable) uncharge(h *admitHost) {
	if h.charged--; h.charged <= 0 {
		delete(t.hosts, h.name)
	}
}

// charged is how many connections of host count against
// max_unauthenticated_per_host.
func (t *admitTable) charged(host string) int {
	if h := t.hosts[host]; h != nil {
		return h.charged
	}
	return 0
}
