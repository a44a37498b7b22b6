package e2e

// Hostile clients (issue 16): floods of oversized pre-login packets and
// stalled handshakes under sysbench load, and password spraying, from
// loopback addresses other than 127.0.0.1 (127.0.0.2, .3, ... are other
// sources for Vigil's login guard; Linux routes all of 127/8 to lo).

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// hostileEnv is a sandbox with Vigil in front, its config as applied.
type hostileEnv struct {
	sb    *sandbox.Sandbox
	v     *vigilProc
	cfg   *config.Config
	addr  string
	admin string
	token string
}

func newHostileEnv(t *testing.T, nodes int, tweak func(*config.Config)) *hostileEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e")
	}
	raiseNoFile(t, 20000) // Vigil inherits it
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Replication, Nodes: nodes})
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(cfg)
	}
	data, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sb.Dir(), "vigil-hostile.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// Read it back: the defaults as Vigil applies them.
	applied, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := &hostileEnv{sb: sb, cfg: applied, addr: applied.Clusters[0].Listen, admin: applied.Admin.Listen, token: applied.Admin.Token}
	e.v = startVigil(t, path, e.addr)
	Eventually(t, 30*time.Second, "the admin API and a routed writer", func() error {
		code, body, err := e.get("/api/v1/servers")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET /api/v1/servers: %d", code)
		}
		var list []admin.ServerView
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			return err
		}
		for _, s := range list {
			if s.State != "ONLINE" {
				return fmt.Errorf("%s is %s", s.Name, s.State)
			}
		}
		return nil
	})
	s := applied.Security
	t.Logf("security: handshake_timeout %s, max_unauthenticated_connections %d, max_unauthenticated_per_host %d, failed_logins {free %d, free_per_host %d, delay %s, max_delay %s, window %s, block_after %d}",
		s.HandshakeTimeout.Duration, s.MaxUnauthenticated, s.MaxUnauthenticatedPerHost, s.FailedLogins.Free, s.FailedLogins.FreePerHost,
		s.FailedLogins.Delay.Duration, s.FailedLogins.MaxDelay.Duration, s.FailedLogins.Window.Duration, s.FailedLogins.BlockAfter)
	return e
}

var hostileHTTP = &http.Client{Timeout: 10 * time.Second}

func (e *hostileEnv) get(path string) (int, string, error) {
	req, err := http.NewRequest("GET", "http://"+e.admin+path, nil)
	if err != nil {
		return 0, "", err
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	resp, err := hostileHTTP.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// metric reads one series of /metrics, e.g. `vigil_login_guard_total{action="refused"}`
// (absent: 0).
func (e *hostileEnv) metric(series string) (float64, error) {
	code, body, err := e.get("/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %d", code)
	}
	return metricIn(body, series), nil
}

func (e *hostileEnv) mustMetric(t *testing.T, series string) float64 {
	t.Helper()
	v, err := e.metric(series)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func metricIn(body, series string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

func (e *hostileEnv) eventsOf(t *testing.T, kind string) []admin.Event {
	t.Helper()
	code, body, err := e.get("/api/v1/events?limit=1000&kind=" + kind)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v1/events: %d %v %s", code, err, body)
	}
	var list []admin.Event
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("events: %v\n%s", err, body)
	}
	return list
}

// dialFrom connects to addr from the local address from (no port).
func dialFrom(ctx context.Context, from, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 3 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	return d.DialContext(ctx, "tcp", addr)
}

// readRaw reads one MySQL frame (payloads over 64 KiB are refused: a
// server has no reason to send those here).
func readRaw(c net.Conn, deadline time.Time) ([]byte, error) {
	_ = c.SetReadDeadline(deadline)
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	if n == 0 || n > 64<<10 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// errPacket decodes an ERR payload: code, SQLSTATE (if any), message.
func errPacket(p []byte) (uint16, string, string) {
	if len(p) < 3 || p[0] != 0xff {
		return 0, "", ""
	}
	code := binary.LittleEndian.Uint16(p[1:3])
	if len(p) >= 9 && p[3] == '#' {
		return code, string(p[4:9]), string(p[9:])
	}
	return code, "", string(p[3:])
}

var fromDialers sync.Map

// netFrom is a go-sql-driver network name that dials from the local
// address from.
func netFrom(from string) string {
	name := "tcp-from-" + from
	if _, loaded := fromDialers.LoadOrStore(name, true); !loaded {
		mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
			return dialFrom(ctx, from, addr)
		})
	}
	return name
}

// loginOnce logs in with go-sql-driver on a new connection from the local
// address from and closes it; it returns how long the login took.
func loginOnce(ctx context.Context, from, addr, user, pass, db string) (time.Duration, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Addr, cfg.DBName = user, pass, addr, db
	cfg.Net = "tcp"
	if from != "" {
		cfg.Net = netFrom(from)
	}
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	c, err := conn.Connect(ctx)
	d := time.Since(t0)
	if err == nil {
		c.Close()
	}
	return d, err
}

func mysqlCode(err error) int {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return int(me.Number)
	}
	var se *mysqlproto.SQLError
	if errors.As(err, &se) {
		return int(se.Code)
	}
	return -1
}

// rawLogin logs in with mysql_native_password from the local address
// from, on Vigil's own protocol code (for COM_CHANGE_USER afterwards).
func rawLogin(ctx context.Context, from, addr, user, pass string) (*mysqlproto.Conn, error) {
	nc, err := dialFrom(ctx, from, addr)
	if err != nil {
		return nil, err
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	c := mysqlproto.NewConn(nc)
	fail := func(err error) (*mysqlproto.Conn, error) { nc.Close(); return nil, err }
	c.Seq = 0
	p, err := c.ReadPacket()
	if err != nil {
		return fail(err)
	}
	if p[0] == mysqlproto.ErrPacket {
		return fail(mysqlproto.ParseErr(p))
	}
	g, err := mysqlproto.ParseGreeting(p)
	if err != nil {
		return fail(err)
	}
	caps := g.Capabilities & (mysqlproto.CapabilityClientLongPassword | mysqlproto.CapabilityClientProtocol41 |
		mysqlproto.CapabilityClientSecureConnection | mysqlproto.CapabilityClientPluginAuth | mysqlproto.CapabilityClientTransactions |
		mysqlproto.CapabilityClientLongFlag)
	if err := c.WritePacket(mysqlproto.AppendHandshakeResponse(nil, &mysqlproto.HandshakeResponse{
		Capabilities: caps, MaxPacket: 16 << 20, Collation: mysqlproto.DefaultCollationID, User: user,
		AuthResponse: nativeScramble(g.Nonce, pass), Plugin: mysqlproto.AuthNativePassword,
	})); err != nil {
		return fail(err)
	}
	if err := c.Flush(); err != nil {
		return fail(err)
	}
	for range 3 {
		p, err := c.ReadPacket()
		if err != nil {
			return fail(err)
		}
		switch p[0] {
		case mysqlproto.OKPacket:
			_ = nc.SetDeadline(time.Now().Add(time.Minute)) // bounds what the caller does next
			return c, nil
		case mysqlproto.ErrPacket:
			return fail(mysqlproto.ParseErr(p))
		case mysqlproto.AuthSwitchRequest:
			_, pos, _ := mysqlproto.ReadNulString(p, 1)
			nonce := p[pos:]
			if n := len(nonce); n > 0 && nonce[n-1] == 0 {
				nonce = nonce[:n-1]
			}
			if err := c.WritePacket(nativeScramble(nonce, pass)); err != nil {
				return fail(err)
			}
			if err := c.Flush(); err != nil {
				return fail(err)
			}
		default:
			return fail(fmt.Errorf("unexpected 0x%02x during login", p[0]))
		}
	}
	return fail(errors.New("login did not end"))
}

// rssSampler samples the VmRSS of pid every period until stopped.
type rssSampler struct {
	stopc chan struct{}
	done  chan struct{}
	max   atomic.Int64
	n     atomic.Int64
}

func sampleRSS(pid int, period time.Duration) *rssSampler {
	r := &rssSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			if v := rssKiB(pid); v > r.max.Load() {
				r.max.Store(v)
			}
			r.n.Add(1)
			select {
			case <-r.stopc:
				return
			case <-tk.C:
			}
		}
	}()
	return r
}

func (r *rssSampler) stop() (maxKiB, samples int64) {
	select {
	case <-r.stopc:
	default:
		close(r.stopc)
	}
	<-r.done
	return r.max.Load(), r.n.Load()
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p+0.5)]
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// runSysbench runs sysbench against Vigil; it returns the output and the
// error of the run (bounded by the run's time plus two minutes).
func runSysbench(addr string, args ...string) (string, error) {
	host, port, _ := strings.Cut(addr, ":")
	base := []string{"--db-driver=mysql", "--mysql-host=" + host, "--mysql-port=" + port,
		"--mysql-user=app", "--mysql-password=app", "--mysql-db=sbtest", "--tables=2", "--table-size=10000"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sysbench", append(base, args...)...).CombinedOutput()
	return string(out), err
}

// legitLoop logs in with the right password every period until stopped,
// recording each login's latency and failures.
type legitLoop struct {
	mu   sync.Mutex
	lat  []time.Duration
	errs []string
	// attempts: logins tried; retries: further tries they needed.
	attempts, retries int
	stopc             chan struct{}
	done              chan struct{}
}

// startLegit logs in from 127.0.0.1 to schema sbtest.
func startLegit(addr string, period time.Duration) *legitLoop {
	return startLogins(addr, "127.0.0.1", "sbtest", period, 1)
}

// startLogins logs in from the local address from, giving each login up
// to tries tries (the latency recorded is the successful try's).
func startLogins(addr, from, db string, period time.Duration, tries int) *legitLoop {
	l := &legitLoop{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			var d time.Duration
			var err error
			try := 0
			for ; try < tries; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				d, err = loginOnce(ctx, from, addr, "app", "app", db)
				cancel()
				if err == nil {
					break
				}
			}
			l.mu.Lock()
			l.attempts++
			l.retries += min(try, tries-1)
			if err != nil {
				l.errs = append(l.errs, fmt.Sprintf("after %s: %v", ms(d), err))
			} else {
				l.lat = append(l.lat, d)
			}
			l.mu.Unlock()
			select {
			case <-l.stopc:
				return
			case <-tk.C:
			}
		}
	}()
	return l
}

// baseline lets l log in for 2 s without an attack: every login must
// succeed.
func baseline(t *testing.T, l *legitLoop) []time.Duration {
	t.Helper()
	time.Sleep(2 * time.Second)
	lat, errs := l.stop()
	if len(errs) > 0 {
		t.Fatalf("legitimate logins fail without an attack: %v", errs)
	}
	return lat
}

func (l *legitLoop) stop() ([]time.Duration, []string) {
	close(l.stopc)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lat), slices.Clone(l.errs)
}

// floodAttack runs the pre-login attackers of TestHostileClients.
type floodAttack struct {
	addr   string
	active atomic.Bool
	// closing: the test closes the remaining connections itself.
	closing atomic.Bool
	wg      sync.WaitGroup

	mu                                    sync.Mutex
	conns                                 map[net.Conn]bool
	dials, dialErrs, greetings, firstErrs int
	refused                               map[string]int // by source address
	badFirst                              []string
	refusalMsg                            string
	// oversized: how long Vigil took to close after the 16 MiB header
	// (or what else it did).
	overClosed    []time.Duration
	overNotClosed int
	overReplies   map[string]int
	// evictedPause: a stalled attacker closed by Vigil within a second
	// (evicted) comes back after this (0: at once).
	evictedPause time.Duration
	// stalled: how long Vigil kept a silent connection after its greeting,
	// by source address.
	stalledLife map[string][]time.Duration
	// evictedEarly: closed by Vigil before the greeting could be read (a
	// newer connection of its address took its place at once).
	evictedEarly   int
	stalledReplies map[string]int
}

const (
	floodRefusedPause = 250 * time.Millisecond // a refused attacker retries after this
	floodRedialPause  = 500 * time.Millisecond // an oversized attacker, once closed, comes back after this
)

// newFloodAttack is an attack on addr, active (start its workers).
func newFloodAttack(addr string) *floodAttack {
	a := &floodAttack{addr: addr, conns: map[net.Conn]bool{}, refused: map[string]int{},
		overReplies: map[string]int{}, stalledReplies: map[string]int{}, stalledLife: map[string][]time.Duration{}}
	a.active.Store(true)
	return a
}

func (a *floodAttack) track(c net.Conn, on bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if on {
		a.conns[c] = true
	} else {
		delete(a.conns, c)
	}
}

func (a *floodAttack) sleep(d time.Duration) {
	for end := time.Now().Add(d); a.active.Load() && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
}

// worker is one attacking client: kind "oversize" reads the greeting and
// announces a 16 MiB packet (length 0xFFFFFF, sequence 1) followed by a
// few bytes, then holds the connection; "stall" reads the greeting and
// sends nothing; "trickle" sends its handshake response a byte every 2 s.
// Refused connections must get 1040 (08004) as their first packet.
func (a *floodAttack) worker(kind, from string) {
	defer a.wg.Done()
	for a.active.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		c, err := dialFrom(ctx, from, a.addr)
		cancel()
		a.mu.Lock()
		a.dials++
		if err != nil {
			a.dialErrs++
		}
		a.mu.Unlock()
		if err != nil {
			a.sleep(floodRefusedPause)
			continue
		}
		a.track(c, true)
		p, err := readRaw(c, time.Now().Add(5*time.Second))
		if err != nil || p[0] != 0x0a {
			a.mu.Lock()
			switch {
			case err != nil && !isTimeout(err):
				a.evictedEarly++
			case err != nil:
				a.firstErrs++
				a.badFirst = append(a.badFirst, fmt.Sprintf("%s from %s: reading the first packet: %v", kind, from, err))
			case p[0] == 0xff:
				code, state, msg := errPacket(p)
				if code == 1040 && (state == "" || state == "08004") {
					a.refused[from]++
					if a.refusalMsg == "" {
						a.refusalMsg = fmt.Sprintf("%d (%s) %s", code, state, msg)
					}
				} else {
					a.badFirst = append(a.badFirst, fmt.Sprintf("%s from %s: first packet ERR %d (%s) %s", kind, from, code, state, msg))
				}
			default:
				a.badFirst = append(a.badFirst, fmt.Sprintf("%s from %s: first packet starts with 0x%02x", kind, from, p[0]))
			}
			a.mu.Unlock()
			c.Close()
			a.track(c, false)
			a.sleep(floodRefusedPause)
			continue
		}
		a.mu.Lock()
		a.greetings++
		a.mu.Unlock()
		switch kind {
		case "oversize":
			t0 := time.Now()
			_, werr := c.Write([]byte{0xff, 0xff, 0xff, 0x01, 'h', 'o', 's', 't', 'i', 'l', 'e', '!'})
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var buf [512]byte
			n, err := c.Read(buf[:])
			a.mu.Lock()
			switch {
			case werr != nil:
				a.overReplies["write failed: "+werr.Error()]++
				a.overClosed = append(a.overClosed, time.Since(t0))
			case n > 0:
				reply := fmt.Sprintf("%d bytes", n)
				if n > 4 && buf[4] == 0xff {
					code, state, msg := errPacket(buf[4:n])
					reply = fmt.Sprintf("ERR %d (%s) %s", code, state, msg)
				}
				a.overReplies[reply]++
				a.overClosed = append(a.overClosed, time.Since(t0))
			case isTimeout(err):
				a.overNotClosed++
			default:
				a.overClosed = append(a.overClosed, time.Since(t0))
				a.overReplies[closeKind(err)]++
			}
			a.mu.Unlock()
			c.Close()
			a.track(c, false)
			a.sleep(floodRedialPause)
		case "stall", "trickle":
			t0 := time.Now()
			var buf [512]byte
			n, err := a.hold(c, kind == "trickle", buf[:]) // until Vigil gives up on it (or the test closes it)
			if a.closing.Load() {
				return
			}
			a.mu.Lock()
			a.stalledLife[from] = append(a.stalledLife[from], time.Since(t0))
			if n > 0 {
				reply := fmt.Sprintf("%d bytes", n)
				if n > 4 && buf[4] == 0xff {
					code, state, msg := errPacket(buf[4:n])
					reply = fmt.Sprintf("ERR %d (%s) %s", code, state, msg)
				}
				a.stalledReplies[reply]++
			} else {
				a.stalledReplies[closeKind(err)]++
			}
			a.mu.Unlock()
			c.Close()
			a.track(c, false)
			if time.Since(t0) < time.Second {
				a.sleep(a.evictedPause)
			}
		}
	}
}

// hold reads c until Vigil sends something or closes it; trickle sends
// a handshake response a byte every 2 s meanwhile (slowloris: a 64-byte
// frame announced, never complete within handshake_timeout).
func (a *floodAttack) hold(c net.Conn, trickle bool, buf []byte) (int, error) {
	if !trickle {
		_ = c.SetReadDeadline(time.Time{})
		return c.Read(buf)
	}
	if _, err := c.Write([]byte{64, 0, 0, 1}); err != nil {
		return 0, err
	}
	for {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		if !isTimeout(err) {
			return n, err
		}
		if _, err := c.Write([]byte{0}); err != nil {
			return 0, err
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func closeKind(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "closed (EOF)"
	case err != nil && strings.Contains(err.Error(), "reset"):
		return "closed (reset)"
	default:
		return fmt.Sprintf("closed (%v)", err)
	}
}

// closeAll closes the connections still open and waits for the workers.
func (a *floodAttack) closeAll(t *testing.T) {
	a.active.Store(false)
	a.closing.Store(true)
	a.mu.Lock()
	for c := range a.conns {
		c.Close()
	}
	a.mu.Unlock()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("attack workers did not stop within 30s")
	}
}

// TestHostileClients: 500 clients announcing 16 MiB packets and 200
// stalled handshakes, from four attacking addresses, while 32 sysbench
// threads run through Vigil from 127.0.0.1: Vigil's RSS stays under
// 300 MB, sysbench sees no error, a legitimate login takes under a
// second, what is refused gets 1040, an address over
// max_unauthenticated_per_host makes room among its own connections
// (issue 25), and the unauthenticated connections drain within
// handshake_timeout once the attack stops.
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatal("sysbench is not installed: run scripts/install-deps.sh")
	}
	start := time.Now()
	env := newHostileEnv(t, 2, func(c *config.Config) {
		c.Clusters[0].Pool.MaxOpen = 60
	})
	sec := env.cfg.Security
	perHost := sec.MaxUnauthenticatedPerHost
	if sec.MaxUnauthenticated < 700 {
		t.Fatalf("max_unauthenticated_connections %d: the test wants the default (1000) above the 700 attackers", sec.MaxUnauthenticated)
	}
	rss := sampleRSS(env.v.pid(), 200*time.Millisecond)
	defer rss.stop()

	if out, err := runSysbench(env.addr, "oltp_read_only", "prepare"); err != nil {
		t.Fatalf("sysbench prepare: %v\n%s", err, out)
	}
	time.Sleep(2 * time.Second) // the replica catches up
	t.Logf("RSS after prepare: %d KiB", rssKiB(env.v.pid()))

	// Baseline without the attack.
	baseOut, err := runSysbench(env.addr, "oltp_read_only", "--threads=32", "--time=10", "--report-interval=0", "--mysql-ignore-errors=none", "run")
	if err != nil {
		t.Fatalf("baseline sysbench: %v\n%s", err, baseOut)
	}
	baseQPS := "?"
	if m := reQueries.FindStringSubmatch(baseOut); m != nil {
		baseQPS = m[2]
	}
	baseLat := baseline(t, startLegit(env.addr, 100*time.Millisecond))
	refused0 := env.mustMetric(t, `vigil_login_guard_total{action="refused"}`)
	evicted0 := env.mustMetric(t, `vigil_login_guard_total{action="evicted"}`)
	t.Logf("baseline: sysbench oltp_read_only 32 threads 10s: %s qps; legit login p50 %s p95 %s; RSS %d KiB", baseQPS,
		ms(pct(baseLat, .5)), ms(pct(baseLat, .95)), rssKiB(env.v.pid()))

	// The attack: 200 stalled (150 from .2, 50 from .3) and 500 oversized
	// (125 from each of .2 .. .5). 127.0.0.2 wants 275 slots, over the
	// per-host limit; the total stays under max_unauthenticated_connections,
	// so 127.0.0.1 is never refused.
	a := newFloodAttack(env.addr)
	// Evicted (issue 25) like refused: retried, not in a tight loop.
	a.evictedPause = floodRefusedPause
	defer a.closeAll(t)
	attackStart := time.Now()
	for i := range 200 {
		from := "127.0.0.2"
		if i >= 150 {
			from = "127.0.0.3"
		}
		a.wg.Add(1)
		go a.worker("stall", from)
	}
	for i := range 500 {
		a.wg.Add(1)
		go a.worker("oversize", fmt.Sprintf("127.0.0.%d", 2+i%4))
	}
	// The gauge while under attack.
	var gaugeMax atomic.Int64
	gaugeStop := make(chan struct{})
	gaugeDone := make(chan struct{})
	go func() {
		defer close(gaugeDone)
		for {
			if v, err := env.metric("vigil_unauthenticated_connections"); err == nil && int64(v) > gaugeMax.Load() {
				gaugeMax.Store(int64(v))
			}
			select {
			case <-gaugeStop:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	time.Sleep(2 * time.Second) // sysbench logs in under attack
	legit := startLegit(env.addr, 200*time.Millisecond)
	sbOut, sbErr := runSysbench(env.addr, "oltp_read_only", "--threads=32", "--time=30", "--report-interval=0", "--mysql-ignore-errors=none", "run")
	lat, legitErrs := legit.stop()
	a.active.Store(false)
	attackEnd := time.Now()
	close(gaugeStop)
	<-gaugeDone

	// The stalled connections still open are left to Vigil's handshake
	// timeout: the gauge must come back to ~0 within it (+ a margin).
	drainLimit := sec.HandshakeTimeout.Duration + 3*time.Second
	var drained time.Duration
	var lastGauge float64
	for {
		v, err := env.metric("vigil_unauthenticated_connections")
		if err == nil {
			lastGauge = v
			if v <= 1 {
				drained = time.Since(attackEnd)
				break
			}
		}
		if time.Since(attackEnd) > drainLimit+5*time.Second {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Give the stalled workers the moment to record Vigil's close.
	time.Sleep(500 * time.Millisecond)
	a.closeAll(t)
	maxRSS, samples := rss.stop()
	refused := env.mustMetric(t, `vigil_login_guard_total{action="refused"}`) - refused0
	evicted := env.mustMetric(t, `vigil_login_guard_total{action="evicted"}`) - evicted0

	// Report.
	a.mu.Lock()
	defer a.mu.Unlock()
	sbQPS := "?"
	if m := reQueries.FindStringSubmatch(sbOut); m != nil {
		sbQPS = m[2]
	}
	totalRefused := 0
	for _, n := range a.refused {
		totalRefused += n
	}
	t.Logf("attack for %s: %d dials (%d failed), %d greetings, %d refused with %s, by source %v; first-packet problems %d",
		attackEnd.Sub(attackStart).Round(time.Millisecond), a.dials, a.dialErrs, a.greetings, totalRefused, a.refusalMsg, a.refused, len(a.badFirst))
	t.Logf("oversized: %d closed by Vigil (p50 %s, max %s after the header), %d not closed within 5s; replies %v",
		len(a.overClosed), ms(pct(a.overClosed, .5)), ms(pct(a.overClosed, 1)), a.overNotClosed, a.overReplies)
	told := 0
	for r, n := range a.overReplies {
		if strings.HasPrefix(r, "ERR 1153 (08S01)") {
			told += n
		}
	}
	if told == 0 {
		t.Errorf("no client that announced 16 MiB before login was told why (ERR 1153): %v", a.overReplies)
	}
	for _, from := range []string{"127.0.0.2", "127.0.0.3"} {
		life := a.stalledLife[from]
		t.Logf("stalled from %s: %d closed by Vigil after p50 %s (min %s, max %s)", from, len(life), ms(pct(life, .5)), ms(pct(life, 0)), ms(pct(life, 1)))
	}
	t.Logf("stalled: replies %v; %d attacker connections closed before their greeting could be read", a.stalledReplies, a.evictedEarly)
	t.Logf("vigil_unauthenticated_connections: max %d under attack; %v after the attack (limit %s); vigil_login_guard_total{refused} +%.0f {evicted} +%.0f",
		gaugeMax.Load(), drained.Round(time.Millisecond), drainLimit, refused, evicted)
	t.Logf("legit logins from 127.0.0.1 under attack: %d ok, %d failed, p50 %s p95 %s max %s (baseline p50 %s)",
		len(lat), len(legitErrs), ms(pct(lat, .5)), ms(pct(lat, .95)), ms(pct(lat, 1)), ms(pct(baseLat, .5)))
	t.Logf("sysbench oltp_read_only 32 threads 30s under attack: %s qps (baseline %s qps), errors %d", sbQPS, baseQPS, sysbenchErrors(sbOut))
	t.Logf("Vigil RSS: max %d KiB (%.1f MB) over %d samples every 200ms; test took %s", maxRSS, float64(maxRSS)/1024, samples, time.Since(start).Round(time.Second))

	// Acceptance.
	if sbErr != nil || strings.Contains(sbOut, "FATAL") {
		t.Errorf("sysbench under attack: %v\n%s", sbErr, sbOut)
	} else if n := sysbenchErrors(sbOut); n != 0 {
		t.Errorf("sysbench under attack: %d errors\n%s", n, sbOut)
	}
	if maxRSS <= 0 || maxRSS >= 300*1024 {
		t.Errorf("Vigil's RSS reached %d KiB (limit 300 MB)", maxRSS)
	}
	if len(legitErrs) > 0 {
		t.Errorf("%d legitimate logins failed under attack: %v", len(legitErrs), legitErrs[:min(5, len(legitErrs))])
	}
	if len(lat) < 20 {
		t.Errorf("only %d legitimate logins under attack", len(lat))
	}
	if m := pct(lat, 1); m > time.Second {
		t.Errorf("a legitimate login took %s under attack (limit 1s)", m)
	}
	if len(a.badFirst) > 0 {
		t.Errorf("%d attacker connections got something else than a greeting or 1040 first: %v", len(a.badFirst), a.badFirst[:min(5, len(a.badFirst))])
	}
	// 127.0.0.2 wants 275 slots: at max_unauthenticated_per_host its own
	// oldest handshakes make room for its new connections (issue 25).
	if evicted == 0 {
		t.Errorf("127.0.0.2 (275 concurrent attackers) never made room among its own: max_unauthenticated_per_host %d not enforced", perHost)
	}
	if refused < float64(totalRefused) {
		t.Errorf("vigil_login_guard_total{action=\"refused\"} grew by %.0f, but attackers saw %d refusals", refused, totalRefused)
	}
	if g := gaugeMax.Load(); g > int64(4*perHost+40) {
		t.Errorf("vigil_unauthenticated_connections reached %d: more than 4 attacking addresses x %d per host (+ legit)", g, perHost)
	} else if g == 0 {
		t.Errorf("vigil_unauthenticated_connections never showed the attack")
	}
	if drained == 0 || drained > drainLimit {
		t.Errorf("vigil_unauthenticated_connections still %.0f %s after the attack (limit handshake_timeout + 3s = %s)", lastGauge, time.Since(attackEnd).Round(time.Millisecond), drainLimit)
	}
	if a.overNotClosed > 0 {
		t.Errorf("%d connections that announced 16 MiB before login were still open 5s later (refused from the header?)", a.overNotClosed)
	}
	if len(a.overClosed) == 0 {
		t.Errorf("no oversized attacker got past the greeting")
	} else if p := pct(a.overClosed, .99); p > 2*time.Second {
		t.Errorf("Vigil took %s (p99) to drop a client that announced 16 MiB before login", p)
	}
	// A stalled handshake lasts handshake_timeout at most; one made room
	// for a newer connection of its address (127.0.0.2 and .3 go over
	// their share) ends sooner.
	for _, from := range []string{"127.0.0.2", "127.0.0.3"} {
		if life := a.stalledLife[from]; len(life) == 0 {
			t.Errorf("no stalled handshake from %s was ended by Vigil", from)
		} else if hi := pct(life, 1); hi < sec.HandshakeTimeout.Duration-time.Second || hi > sec.HandshakeTimeout.Duration+3*time.Second {
			t.Errorf("stalled handshakes from %s lasted at most %s, not about handshake_timeout %s", from, hi, sec.HandshakeTimeout.Duration)
		}
	}
}

// sprayRec is one attacker login attempt.
type sprayRec struct {
	at, took time.Duration // start (from the attack's start) and duration
	code     int
	err      string
}

// TestHostilePasswordSpraying: wrong-password logins from 127.0.0.2 with
// 64 concurrent workers (patient: each waits for its error) over 100 user
// names, then 200 impatient workers from 127.0.0.3 that give up on an
// answer after 25 ms, then COM_CHANGE_USER guesses from 127.0.0.4, while
// a legitimate client logs in from 127.0.0.1 every 50 ms: its logins keep
// succeeding at baseline latency; each attacking address is slowed as
// configured (failed_logins: free 5, free_per_host 50 (default), delay
// 50ms doubling to max_delay 400ms); admission limits stay at their
// defaults (1000 total, 100 per host): the 64 patient workers are bounded
// by the throttle, not by the admission limit.
func TestHostilePasswordSpraying(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	start := time.Now()
	const (
		workers    = 64
		maxTries   = 10000
		budget     = 30 * time.Second
		delay      = 50 * time.Millisecond
		maxDelay   = 400 * time.Millisecond
		legitEvery = 50 * time.Millisecond
	)
	env := newHostileEnv(t, 2, func(c *config.Config) {
		f := &c.Security.FailedLogins
		f.Free = 5
		f.Delay = config.Duration{Duration: delay}
		f.MaxDelay = config.Duration{Duration: maxDelay}
	})
	fl := env.cfg.Security.FailedLogins
	perHost := env.cfg.Security.MaxUnauthenticatedPerHost
	if fl.Free != 5 || fl.Delay.Duration != delay || fl.MaxDelay.Duration != maxDelay || fl.BlockAfter != 0 {
		t.Fatalf("failed_logins as applied: %+v", fl)
	}
	freeHost := fl.FreePerHost
	// Before the first delay of max_delay: free_per_host free failures,
	// then delay, 2*delay, ... below max_delay.
	ramp := 0
	for d := delay; d < maxDelay; d *= 2 {
		ramp++
	}

	// Baseline: the legitimate client alone.
	ll := startLegit(env.addr, legitEvery)
	time.Sleep(3 * time.Second)
	baseLat, baseErrs := ll.stop()
	if len(baseErrs) > 0 {
		t.Fatalf("legitimate logins fail without an attack: %v", baseErrs)
	}
	throttled0 := env.mustMetric(t, `vigil_login_guard_total{action="throttled"}`)
	refused0 := env.mustMetric(t, `vigil_login_guard_total{action="refused"}`)

	// Phase 1: patient spraying from 127.0.0.2.
	users := []string{"app", "root", "admin", "monitor", "vigil", "mysql", "test", "backup"}
	for i := len(users); i < 100; i++ {
		users = append(users, fmt.Sprintf("user%02d", i))
	}
	legit := startLegit(env.addr, legitEvery)
	var (
		mu    sync.Mutex
		recs  []sprayRec
		tries atomic.Int64
		wg    sync.WaitGroup
	)
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(t0) < budget {
				n := tries.Add(1)
				if n > maxTries {
					return
				}
				at := time.Since(t0)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				d, err := loginOnce(ctx, "127.0.0.2", env.addr, users[int(n)%len(users)], fmt.Sprintf("guess-%d", n), "")
				cancel()
				r := sprayRec{at: at, took: d, code: mysqlCode(err)}
				if err == nil {
					r.code, r.err = 0, "logged in"
				} else if r.code != 1045 {
					r.err = err.Error()
				}
				mu.Lock()
				recs = append(recs, r)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	attackTook := time.Since(t0)
	during, duringErrs := legit.stop()
	throttled1 := env.mustMetric(t, `vigil_login_guard_total{action="throttled"}`)

	var fast, delayed, atMax int
	var others []string
	var steady int
	var tooks []time.Duration
	const steadyFrom = 2 * time.Second
	for _, r := range recs {
		if r.code != 1045 {
			others = append(others, fmt.Sprintf("code %d: %s", r.code, r.err))
			continue
		}
		tooks = append(tooks, r.took)
		switch {
		case r.took < delay:
			fast++
		case r.took < maxDelay-10*time.Millisecond:
			delayed++
		default:
			atMax++
		}
		if r.at >= steadyFrom {
			steady++
		}
	}
	rate := float64(len(recs)) / attackTook.Seconds()
	steadyRate := float64(steady) / (attackTook - steadyFrom).Seconds()
	bound := float64(workers) / maxDelay.Seconds()
	t.Logf("patient spraying from 127.0.0.2: %d attempts by %d workers over %d users in %s: %.1f/s overall, %.1f/s after %s (throttle bound workers/max_delay = %.0f/s); %d answered in < %s, %d delayed below max_delay, %d at >= max_delay; attempt latency p50 %s p95 %s max %s; other outcomes %d",
		len(recs), workers, len(users), attackTook.Round(time.Millisecond), rate, steadyRate, steadyFrom, bound, fast, delay, delayed, atMax,
		ms(pct(tooks, .5)), ms(pct(tooks, .95)), ms(pct(tooks, 1)), len(others))
	if len(recs) < maxTries {
		t.Logf("10,000 attempts are out of reach in %s: at most %.0f/s get an answer (as intended)", budget, bound)
	}
	t.Logf("legit logins from 127.0.0.1: baseline %d: p50 %s p95 %s; during spraying %d ok, %d failed: p50 %s p95 %s max %s",
		len(baseLat), ms(pct(baseLat, .5)), ms(pct(baseLat, .95)), len(during), len(duringErrs), ms(pct(during, .5)), ms(pct(during, .95)), ms(pct(during, 1)))
	t.Logf("vigil_login_guard_total{action=\"throttled\"}: +%.0f", throttled1-throttled0)

	if len(others) > 0 {
		t.Errorf("%d attacker attempts did not end in 1045: %v", len(others), others[:min(5, len(others))])
	}
	if fast > freeHost {
		// The free failures are counted per address (free_per_host) and
		// per user (free): spraying 100 users, the address's count rules.
		t.Errorf("%d failed logins were answered in < %s: the address has %d free failures", fast, delay, freeHost)
	}
	if n := fast + delayed; n > freeHost+ramp {
		t.Errorf("%d failed logins were answered before max_delay %s; expected at most free_per_host %d + ramp %d", n, maxDelay, freeHost, ramp)
	}
	if atMax == 0 || delayed+atMax == 0 {
		t.Errorf("no attacker attempt was delayed")
	}
	if steadyRate > bound*1.05 {
		t.Errorf("the attacker got %.1f answers/s in steady state, over workers/max_delay = %.0f/s", steadyRate, bound)
	}
	if d := throttled1 - throttled0; d < float64(len(recs)-freeHost-1) || d > float64(len(recs)) {
		t.Errorf("vigil_login_guard_total{action=\"throttled\"} grew by %.0f for %d failed logins (%d free)", d, len(recs), freeHost)
	}
	checkLegit(t, "password spraying", baseLat, during, duringErrs)
	ev := env.eventsOf(t, "login_throttled")
	found := false
	for _, e := range ev {
		if strings.Contains(e.Message, "127.0.0.2") {
			found = true
			t.Logf("event: %s %s", e.Kind, e.Message)
			break
		}
	}
	if !found {
		t.Errorf("no login_throttled event names 127.0.0.2: %v", ev)
	}
	for _, e := range ev {
		if strings.Contains(e.Message, "127.0.0.1") {
			t.Errorf("the legitimate address was throttled: %s", e.Message)
		}
	}
	t.Logf("login_throttled events: %d", len(ev))

	// Phase 2: impatient attackers from 127.0.0.3 send a wrong password and
	// give up after 25 ms without an answer (no answer means wrong). The
	// throttle's wait must still hold the address's unauthenticated slot,
	// so the guesses Vigil evaluates are bounded by
	// max_unauthenticated_per_host / max_delay.
	t.Run("Impatient", func(t *testing.T) {
		const (
			iworkers = 200
			ibudget  = 8 * time.Second
			patience = 25 * time.Millisecond
		)
		var admitted, refusedN, fastAns, abandoned, evictedN, otherN atomic.Int64
		var otherMu sync.Mutex
		var otherMsgs []string
		legit := startLegit(env.addr, legitEvery)
		var wg sync.WaitGroup
		t0 := time.Now()
		for i := range iworkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; time.Since(t0) < ibudget; n++ {
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					c, err := dialFrom(ctx, "127.0.0.3", env.addr)
					cancel()
					if err != nil {
						otherN.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					p, err := readRaw(c, time.Now().Add(3*time.Second))
					if err != nil || p[0] != 0x0a {
						if err == nil && p[0] == 0xff {
							if code, _, _ := errPacket(p); code == 1040 {
								refusedN.Add(1)
							} else {
								otherN.Add(1)
							}
						} else {
							otherN.Add(1)
							otherMu.Lock()
							otherMsgs = append(otherMsgs, fmt.Sprintf("first packet: %v", err))
							otherMu.Unlock()
						}
						c.Close()
						time.Sleep(50 * time.Millisecond)
						continue
					}
					admitted.Add(1)
					g, err := mysqlproto.ParseGreeting(p)
					if err != nil {
						t.Errorf("greeting: %v", err)
						c.Close()
						return
					}
					resp := mysqlproto.AppendHandshakeResponse(nil, &mysqlproto.HandshakeResponse{
						Capabilities: g.Capabilities & (mysqlproto.CapabilityClientLongPassword | mysqlproto.CapabilityClientProtocol41 |
							mysqlproto.CapabilityClientSecureConnection | mysqlproto.CapabilityClientPluginAuth),
						MaxPacket: 16 << 20, Collation: mysqlproto.DefaultCollationID, User: fmt.Sprintf("user%02d", (i+n)%100),
						AuthResponse: nativeScramble(g.Nonce, fmt.Sprintf("impatient-%d-%d", i, n)), Plugin: mysqlproto.AuthNativePassword,
					})
					frame := append([]byte{byte(len(resp)), byte(len(resp) >> 8), byte(len(resp) >> 16), 1}, resp...)
					if _, err := c.Write(frame); err != nil {
						otherN.Add(1)
						c.Close()
						continue
					}
					r, err := readRaw(c, time.Now().Add(patience))
					switch {
					case err == nil && r[0] == 0xff:
						fastAns.Add(1)
						if code, _, msg := errPacket(r); code != 1045 {
							otherMu.Lock()
							otherMsgs = append([]string{fmt.Sprintf("fast answer %d %s", code, msg)}, otherMsgs...)
							otherMu.Unlock()
						}
					case isTimeout(err):
						abandoned.Add(1)
					case err != nil && !isTimeout(err):
						// Closed without an answer: a newer connection of
						// the address took its place before its password
						// was judged (issue 25); it told nothing. Turned
						// away, like a refusal: retried after a pause.
						evictedN.Add(1)
						c.Close()
						time.Sleep(50 * time.Millisecond)
						continue
					default:
						otherN.Add(1)
						otherMu.Lock()
						otherMsgs = append(otherMsgs, fmt.Sprintf("answer: %v %x", err, r))
						otherMu.Unlock()
					}
					c.Close()
				}
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		during, duringErrs := legit.stop()
		ibound := float64(freeHost+ramp) + float64(perHost)*(took.Seconds()/maxDelay.Seconds()+1)
		evaluated := admitted.Load() - evictedN.Load()
		t.Logf("impatient spraying from 127.0.0.3: %d workers for %s: %d guesses evaluated (greeting + password sent, not closed unanswered: %.0f/s), %d answered within %s, %d abandoned, %d closed unanswered (evicted), %d refused with 1040, %d other; bound free_per_host + ramp + per_host x (T/max_delay + 1) = %.0f",
			iworkers, took.Round(time.Millisecond), evaluated, float64(evaluated)/took.Seconds(), fastAns.Load(), patience,
			abandoned.Load(), evictedN.Load(), refusedN.Load(), otherN.Load(), ibound)
		t.Logf("legit logins from 127.0.0.1 meanwhile: %d ok, %d failed: p50 %s p95 %s max %s", len(during), len(duringErrs),
			ms(pct(during, .5)), ms(pct(during, .95)), ms(pct(during, 1)))
		if len(otherMsgs) > 0 {
			t.Logf("other outcomes: %v", otherMsgs[:min(8, len(otherMsgs))])
		}
		if float64(evaluated) > ibound {
			t.Errorf("impatient attackers had %d guesses evaluated in %s, over %.0f: an abandoned delayed login frees its slot early", evaluated, took, ibound)
		}
		if fastAns.Load() > int64(freeHost) {
			t.Errorf("%d impatient guesses answered within %s (free_per_host %d)", fastAns.Load(), patience, freeHost)
		}
		if refusedN.Load() == 0 {
			t.Errorf("no impatient attacker was refused: the held slots should reach max_unauthenticated_per_host %d", perHost)
		}
		checkLegit(t, "impatient spraying", baseLat, during, duringErrs)
		if r := env.mustMetric(t, `vigil_login_guard_total{action="refused"}`) - refused0; r < float64(refusedN.Load()) {
			t.Errorf("vigil_login_guard_total{action=\"refused\"} grew by %.0f, attackers saw %d refusals", r, refusedN.Load())
		}
	})

	// Phase 3: COM_CHANGE_USER guesses from 127.0.0.4 (go-sql-driver has
	// no change user: Vigil's own protocol code logs in as app, then
	// guesses root's password, three per connection as MariaDB allows).
	t.Run("ChangeUser", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const guesses = 12
		var took []time.Duration
		var c *mysqlproto.Conn
		for k := 1; k <= guesses; k++ {
			if (k-1)%3 == 0 {
				if c != nil {
					c.Close()
				}
				var err error
				c, err = rawLogin(ctx, "127.0.0.4", env.addr, "app", "app")
				if err != nil {
					t.Fatalf("login as app from 127.0.0.4: %v", err)
				}
			}
			t1 := time.Now()
			err := changeUser(c, "root", fmt.Sprintf("cu-guess-%d", k), "")
			d := time.Since(t1)
			if mysqlCode(err) != 1045 {
				t.Fatalf("COM_CHANGE_USER guess %d: %v", k, err)
			}
			took = append(took, d)
		}
		// A fourth guess on the same connection.
		t1 := time.Now()
		err := changeUser(c, "root", "cu-guess-extra", "")
		t.Logf("a 4th COM_CHANGE_USER failure on one connection: %v after %s", err, ms(time.Since(t1)))
		c.Close()
		var want []time.Duration
		for k := 1; k <= guesses; k++ {
			over := k - fl.Free
			w := time.Duration(0)
			if over > 0 {
				w = delay
				for i := 1; i < over && w < maxDelay; i++ {
					w *= 2
				}
				w = min(w, maxDelay)
			}
			want = append(want, w)
		}
		// A failed COM_CHANGE_USER also waits ChangeUserFailDelay (1s, as
		// MariaDB does) whatever the throttle says: the throttle's delay
		// comes on top (docs/security.md).
		fixed := mysqlproto.ChangeUserFailDelay
		var parts []string
		for i := range took {
			parts = append(parts, fmt.Sprintf("#%d %s (throttle %s)", i+1, ms(took[i]), want[i]))
		}
		t.Logf("COM_CHANGE_USER wrong passwords for root from 127.0.0.4 (each also waits the fixed %s): %s", fixed, strings.Join(parts, ", "))
		for i := range took {
			if lo := fixed + want[i]*95/100; took[i] < lo || took[i] > fixed+want[i]+300*time.Millisecond {
				t.Errorf("COM_CHANGE_USER failure #%d answered after %s, want about %s + %s", i+1, took[i], fixed, want[i])
			}
		}
		found := false
		for _, e := range env.eventsOf(t, "login_throttled") {
			if strings.Contains(e.Message, "127.0.0.4") && strings.Contains(e.Message, "root") {
				found = true
				t.Logf("event: %s", e.Message)
			}
		}
		if !found {
			t.Errorf("no login_throttled event for root from 127.0.0.4")
		}
	})
	t.Logf("test took %s", time.Since(start).Round(time.Second))
}

// checkLegit: every legitimate login succeeded, and the median and p95
// stayed within 3x or +50 ms of the baseline.
func checkLegit(t *testing.T, what string, base, during []time.Duration, errs []string) {
	t.Helper()
	if len(errs) > 0 {
		t.Errorf("%s: %d legitimate logins failed: %v", what, len(errs), errs[:min(5, len(errs))])
	}
	if len(during) < 20 {
		t.Errorf("%s: only %d legitimate logins", what, len(during))
		return
	}
	for _, q := range []float64{.5, .95} {
		b, d := pct(base, q), pct(during, q)
		if d > 3*b && d > b+50*time.Millisecond {
			t.Errorf("%s: legitimate login p%.0f %s, baseline %s (more than 3x and +50ms)", what, q*100, d, b)
		}
	}
}
