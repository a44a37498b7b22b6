package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
)

// request is what the fake admin API received.
type request struct {
	Method, Path, Query string
	Auth, ContentType   string
	User, Password      string
	BasicOK             bool
	Body                string
}

// fakeAdmin serves canned answers by "METHOD /path" and records every
// request.
type fakeAdmin struct {
	mu      sync.Mutex
	reqs    []request
	answers map[string]answer
}

type answer struct {
	status int
	body   string
}

func (f *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u, p, ok := r.BasicAuth()
	f.mu.Lock()
	f.reqs = append(f.reqs, request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"),
		ContentType: r.Header.Get("Content-Type"), User: u, Password: p, BasicOK: ok, Body: string(body)})
	a, found := f.answers[r.Method+" "+r.URL.Path]
	f.mu.Unlock()
	if !found {
		a = answer{404, `{"error":"no route ` + r.URL.Path + `"}`}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (f *fakeAdmin) set(route string, a answer) {
	f.mu.Lock()
	f.answers[route] = a
	f.mu.Unlock()
}

func (f *fakeAdmin) last(t *testing.T) request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request reached the admin API")
	}
	return f.reqs[len(f.reqs)-1]
}

// clearEnv keeps the caller's VIGIL_* variables out of the tests.
func clearEnv(t *testing.T) {
	for _, v := range []string{"VIGIL_ADMIN", "VIGIL_ADMIN_TOKEN", "VIGIL_ADMIN_TOKEN_FILE", "VIGIL_SANDBOX_DIR",
		"VIGIL_ADMIN_USER", "VIGIL_ADMIN_PASSWORD"} {
		t.Setenv(v, "")
	}
}

// serve starts a fake admin API with answers.
func serve(t *testing.T, answers map[string]answer) (*fakeAdmin, *httptest.Server) {
	t.Helper()
	clearEnv(t)
	f := &fakeAdmin{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

// ctl runs `vigil ctl args` and returns its exit code, stdout and stderr.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errw bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errw)
	return code, out.String(), errw.String()
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClustersTable(t *testing.T) {
	f, srv := serve(t, map[string]answer{"GET /api/v1/clusters": {200, jsonOf(t, []admin.ClusterView{
		{Name: "main", Type: "replication", Listen: "127.0.0.1:3306", Writer: "db1", Term: 7, Servers: []string{"db1", "db2"}, Sessions: 3, Queries: 42},
		{Name: "ro", Type: "read-only", Listen: "127.0.0.1:3307", WriterReason: "read-only cluster", Servers: []string{"r1"}},
	})}})
	code, out, errs := ctl(t, "--admin", srv.URL, "--token", "s3cret", "clusters")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "CLUSTER") {
		t.Fatalf("output:\n%s", out)
	}
	if f := strings.Fields(lines[1]); strings.Join(f, " ") != "main replication 127.0.0.1:3306 db1 7 db1,db2 3 42" {
		t.Errorf("row %q", lines[1])
	}
	if !strings.Contains(lines[2], "none (read-only cluster)") {
		t.Errorf("a cluster without a writer: %q", lines[2])
	}
	if r := f.last(t); r.Auth != "Bearer s3cret" || r.Method != "GET" {
		t.Errorf("request %+v", r)
	}
}

func TestServersTable(t *testing.T) {
	lag := 1.25
	_, srv := serve(t, map[string]answer{"GET /api/v1/servers": {200, jsonOf(t, []admin.ServerView{
		{Cluster: "main", Name: "db1", Address: "h1:3306", Role: "primary", State: "ONLINE", Readable: true, Writable: true, Writer: true,
			Weight: 1, GTID: "0-1-10", Pool: admin.PoolView{Open: 4, InUse: 1}},
		{Cluster: "main", Name: "db2", Address: "h2:3306", Role: "replica", State: "ONLINE", Readable: true, LagSeconds: &lag,
			Standby: true, Reason: "standby"},
	})}})
	code, out, _ := ctl(t, "--admin", srv.URL, "servers")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("output:\n%s", out)
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "main db1 h1:3306 primary ONLINE rw* 1 - 1/4 0-1-10" {
		t.Errorf("writer row %q", got)
	}
	if got := strings.Join(strings.Fields(lines[2]), " "); got != "main db2 h2:3306 replica ONLINE (standby) r- 0 1.2s 0/0 standby" {
		t.Errorf("replica row %q", got)
	}
}

// --json prints the API's answer as it came.
func TestJSONPassesThrough(t *testing.T) {
	body := `[{"name":"main","servers":[]}]`
	_, srv := serve(t, map[string]answer{"GET /api/v1/clusters": {200, body}})
	if code, out, _ := ctl(t, "--admin", srv.URL, "--json", "clusters"); code != 0 || out != body {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestEvents(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	f, srv := serve(t, map[string]answer{"GET /api/v1/events": {200, jsonOf(t, []admin.Event{
		{Time: at, Cluster: "main", Server: "db2", Kind: "state_changed", Message: "db2 is down"},
		{Time: at, Cluster: "main", Kind: "config_reloaded", Message: "configuration reloaded"},
	})}})
	code, out, _ := ctl(t, "--admin", srv.URL, "--cluster", "main", "events", "--server", "db2", "--kind", "state_changed", "--limit", "5")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if r := f.last(t); r.Query != "cluster=main&server=db2&kind=state_changed&limit=5" {
		t.Errorf("query %q", r.Query)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "main/db2") || !strings.HasSuffix(lines[0], "db2 is down") ||
		!strings.Contains(lines[0], at.Local().Format("2006-01-02 15:04:05.000")) || !strings.Contains(lines[1], "config_reloaded") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestSwitchover(t *testing.T) {
	f, srv := serve(t, map[string]answer{"POST /api/v1/switchover": {200, jsonOf(t, admin.OpResult{OK: true, Cluster: "main",
		Plan: "switchover db1 -> db2", Steps: []string{"fence db1", "promote db2"}, Message: "db2 is the primary", PauseMs: 120})}})
	code, out, errs := ctl(t, "--admin", srv.URL, "--cluster", "main", "switchover", "--to", "db2", "--dry-run")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	want := "switchover db1 -> db2\n  fence db1\n  promote db2\ndb2 is the primary\nwrite pause: 120 ms\n"
	if out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	r := f.last(t)
	var got admin.OpRequest
	if err := json.Unmarshal([]byte(r.Body), &got); err != nil || got != (admin.OpRequest{Cluster: "main", To: "db2", DryRun: true}) {
		t.Errorf("body %s (%v)", r.Body, err)
	}
	if r.ContentType != "application/json" {
		t.Errorf("Content-Type %q: the admin API refuses state changes without application/json", r.ContentType)
	}
}

// An operation the API refuses (its OpResult says why) exits 1 with
// the reason on stderr; --json prints the answer and exits 1 too.
func TestOperationRefused(t *testing.T) {
	f, srv := serve(t, map[string]answer{
		"POST /api/v1/failover": {409, jsonOf(t, admin.OpResult{Cluster: "main", Message: "the primary still answers checks (use --force)"})},
	})
	code, out, errs := ctl(t, "--admin", srv.URL, "failover", "--force", "--accept-loss")
	if code != 1 || out != "" || errs != "vigil ctl: the primary still answers checks (use --force)\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var got admin.OpRequest
	if err := json.Unmarshal([]byte(f.last(t).Body), &got); err != nil || !got.Force || !got.AcceptLoss {
		t.Errorf("body %s", f.last(t).Body)
	}
	code, out, _ = ctl(t, "--admin", srv.URL, "--json", "failover")
	if code != 1 || !strings.Contains(out, `"message":"the primary still answers checks`) {
		t.Fatalf("--json: exit %d, output %q", code, out)
	}
}

// An HTTP error with a JSON error body: its message, the status, exit 1.
func TestHTTPErrors(t *testing.T) {
	_, srv := serve(t, map[string]answer{
		"GET /api/v1/clusters":   {401, `{"error":"unauthorized: send Authorization: Bearer <token>"}`},
		"GET /api/v1/sessions":   {500, `{"error":"boom"}`},
		"GET /api/v1/query_log":  {502, "bad gateway\n"},
		"POST /api/v1/servers":   {400, `{"error":"a server needs a name and an address (host:port)"}`},
		"DELETE /api/v1/digests": {404, `{"error":"no cluster named nope"}`},
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"clusters"}, "vigil ctl: unauthorized: send Authorization: Bearer <token> (HTTP 401)\n"},
		{[]string{"sessions"}, "vigil ctl: boom (HTTP 500)\n"},
		{[]string{"querylog"}, "vigil ctl: bad gateway (HTTP 502)\n"},
		{[]string{"server", "add", "x", "h:1"}, "vigil ctl: a server needs a name and an address (host:port) (HTTP 400)\n"},
		{[]string{"--cluster", "nope", "digests", "--reset"}, "vigil ctl: no cluster named nope (HTTP 404)\n"},
	} {
		code, out, errs := ctl(t, append([]string{"--admin", srv.URL}, tc.args...)...)
		if code != 1 || out != "" || errs != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	_, srv := serve(t, nil)
	url := srv.URL
	srv.Close()
	code, _, errs := ctl(t, "--admin", url, "clusters")
	if code != 1 || !strings.Contains(errs, "cannot reach Vigil's admin API at "+url) || !strings.Contains(errs, "pass --admin") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

// The state-changing commands: method, path, query and body.
func TestCommandsRequests(t *testing.T) {
	ok := answer{200, `{"ok":true}`}
	f, srv := serve(t, map[string]answer{
		"POST /api/v1/servers/db2/state":  ok,
		"POST /api/v1/servers/db2/weight": ok,
		"POST /api/v1/servers":            ok,
		"DELETE /api/v1/servers/db3":      ok,
		"POST /api/v1/config/reload":      ok,
		"DELETE /api/v1/sessions/12":      ok,
		"DELETE /api/v1/query_cache":      ok,
		"GET /api/v1/query_cache":         ok,
		"POST /api/v1/ack":                {200, `{"ok":true,"message":"acknowledged"}`},
		"POST /api/v1/rejoin/db1":         {200, `{"ok":true,"message":"db1 replicates from db2"}`},
	})
	for _, tc := range []struct {
		args                []string
		method, path, query string
		body                string
	}{
		{[]string{"set-state", "db2", "offline_soft"}, "POST", "/api/v1/servers/db2/state", "", `{"cluster":"main","state":"OFFLINE_SOFT"}`},
		{[]string{"set-weight", "db2", "0"}, "POST", "/api/v1/servers/db2/weight", "", `{"cluster":"main","weight":0}`},
		{[]string{"server", "add", "db4", "h4:3306", "--weight", "2", "--role", "replica"}, "POST", "/api/v1/servers", "",
			jsonOf(t, admin.ServerSpec{Cluster: "main", Name: "db4", Address: "h4:3306", Weight: 2, Role: "replica"})},
		{[]string{"server", "remove", "db3"}, "DELETE", "/api/v1/servers/db3", "cluster=main", ""},
		{[]string{"reload"}, "POST", "/api/v1/config/reload", "", ""},
		{[]string{"kill", "12", "--query"}, "DELETE", "/api/v1/sessions/12", "cluster=main&query=true", ""},
		{[]string{"cache", "--purge"}, "DELETE", "/api/v1/query_cache", "", ""},
		{[]string{"cache"}, "GET", "/api/v1/query_cache", "", ""},
		{[]string{"ack"}, "POST", "/api/v1/ack", "", `{"cluster":"main"}`},
		{[]string{"rejoin", "db1"}, "POST", "/api/v1/rejoin/db1", "cluster=main", ""},
	} {
		code, out, errs := ctl(t, append([]string{"--admin", srv.URL, "--cluster", "main"}, tc.args...)...)
		if code != 0 || errs != "" || out == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out, errs)
			continue
		}
		r := f.last(t)
		if r.Method != tc.method || r.Path != tc.path || r.Query != tc.query || strings.TrimSpace(r.Body) != tc.body {
			t.Errorf("%v: sent %s %s?%s %s; want %s %s?%s %s", tc.args, r.Method, r.Path, r.Query, r.Body, tc.method, tc.path, tc.query, tc.body)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	_, srv := serve(t, nil)
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"rejoin"},
		{"set-state", "db1"},
		{"set-weight", "db1", "heavy"},
		{"kill"},
		{"server", "add", "db4"},
		{"server", "move", "db4", "h:1"},
		{"events", "--limit", "many"},
		{"--no-such-flag", "clusters"},
	} {
		code, out, errs := ctl(t, append([]string{"--admin", srv.URL}, args...)...)
		if code != 2 || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and a usage message", args, code, out, errs)
		}
	}
}

func TestCredentials(t *testing.T) {
	f, srv := serve(t, map[string]answer{"GET /api/v1/sessions": {200, "[]"}})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --token-file, trimmed.
	if code, _, _ := ctl(t, "--admin", srv.URL, "--token-file", tokenFile, "sessions"); code != 0 || f.last(t).Auth != "Bearer from-file" {
		t.Fatalf("token file: exit %d, %+v", code, f.last(t))
	}
	// $VIGIL_ADMIN_TOKEN and $VIGIL_ADMIN.
	t.Setenv("VIGIL_ADMIN", srv.URL)
	t.Setenv("VIGIL_ADMIN_TOKEN", "from-env")
	if code, _, _ := ctl(t, "sessions"); code != 0 || f.last(t).Auth != "Bearer from-env" {
		t.Fatalf("environment: exit %d, %+v", code, f.last(t))
	}
	t.Setenv("VIGIL_ADMIN_TOKEN", "")
	// Basic auth.
	if code, _, _ := ctl(t, "--user", "ops", "--password", "pw", "sessions"); code != 0 {
		t.Fatalf("basic: exit %d", code)
	}
	if r := f.last(t); !r.BasicOK || r.User != "ops" || r.Password != "pw" {
		t.Fatalf("basic auth not sent: %+v", r)
	}
	// None at all: no Authorization header.
	if code, _, _ := ctl(t, "sessions"); code != 0 || f.last(t).Auth != "" {
		t.Fatalf("no credentials: %+v", f.last(t))
	}
	// A token file that cannot be read.
	if code, _, errs := ctl(t, "--token-file", filepath.Join(dir, "missing"), "sessions"); code != 1 || !strings.Contains(errs, "admin token") {
		t.Fatalf("missing token file: exit %d, %q", code, errs)
	}
}

// --sandbox DIR: the admin address and the token from sandbox.json, else
// the token Vigil generated in DIR/state.
func TestSandboxDir(t *testing.T) {
	f, srv := serve(t, map[string]answer{"GET /api/v1/sessions": {200, "[]"}})
	host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("sandbox.json", `{"admin":{"host":"`+host+`","port":`+port+`}}`)
	write("state/admin-token", "generated\n")
	if code, _, errs := ctl(t, "--sandbox", dir, "sessions"); code != 0 || f.last(t).Auth != "Bearer generated" {
		t.Fatalf("exit %d %q, %+v", code, errs, f.last(t))
	}
	write("sandbox.json", `{"admin":{"host":"`+host+`","port":`+port+`},"admin_token":"configured"}`)
	if code, _, _ := ctl(t, "--sandbox", dir, "sessions"); code != 0 || f.last(t).Auth != "Bearer configured" {
		t.Fatalf("exit %d, %+v", code, f.last(t))
	}
	if code, _, errs := ctl(t, "--sandbox", t.TempDir(), "sessions"); code != 1 || !strings.Contains(errs, "sandbox's admin address") {
		t.Fatalf("no sandbox.json: exit %d, %q", code, errs)
	}
}

func TestTLS(t *testing.T) {
	clearEnv(t)
	f := &fakeAdmin{answers: map[string]answer{"GET /api/v1/sessions": {200, "[]"}}}
	srv := httptest.NewUnstartedServer(f)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	srv.StartTLS()
	defer srv.Close()
	// Not trusted: refused.
	if code, _, errs := ctl(t, "--admin", srv.URL, "sessions"); code != 1 || !strings.Contains(errs, "certificate") {
		t.Fatalf("untrusted: exit %d, %q", code, errs)
	}
	// --insecure.
	if code, _, errs := ctl(t, "--admin", srv.URL, "--insecure", "sessions"); code != 0 {
		t.Fatalf("--insecure: exit %d, %q", code, errs)
	}
	// --cacert with the server's certificate.
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	pemData := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemData, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ctl(t, "--admin", srv.URL, "--cacert", ca, "sessions"); code != 0 {
		t.Fatalf("--cacert: exit %d, %q", code, errs)
	}
	// A CA file without a certificate, and one that is missing.
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ctl(t, "--admin", srv.URL, "--cacert", bad, "sessions"); code != 1 || !strings.Contains(errs, "holds no PEM certificate") {
		t.Fatalf("bad CA: exit %d, %q", code, errs)
	}
	if code, _, _ := ctl(t, "--admin", srv.URL, "--cacert", filepath.Join(dir, "none.pem"), "sessions"); code != 1 {
		t.Fatalf("missing CA: exit %d", code)
	}
}

func TestDigestsAndRules(t *testing.T) {
	f, srv := serve(t, map[string]answer{
		"GET /api/v1/digests": {200, `[{"cluster":"main","digest":"abc","digest_text":"SELECT ?","user":"app","hostgroup":"reader",` +
			`"count":10,"errors":1,"rows":20,"total_us":1500,"avg_us":150,"p99_us":900,"max_us":1000}]`},
		"GET /api/v1/rules": {200, `[{"cluster":"main","position":1,"name":"slow","hits":4,"route":"reader","cache_ttl_ns":5000000000,` +
			`"block":{"code":1}}]`},
	})
	code, out, _ := ctl(t, "--admin", srv.URL, "--cluster", "main", "digests", "--by", "key", "--sort", "p99", "--limit", "3")
	if code != 0 || f.last(t).Query != "cluster=main&by=key&sort=p99&limit=3" {
		t.Fatalf("exit %d, query %q", code, f.last(t).Query)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		strings.Join(strings.Fields(lines[1]), " ") != "abc 10 1 20 1.5ms 150µs 900µs 1ms app reader SELECT ?" {
		t.Fatalf("digests:\n%s", out)
	}
	code, out, _ = ctl(t, "--admin", srv.URL, "rules")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 ||
		strings.Join(strings.Fields(lines[1]), " ") != "main 1 slow 4 block route=reader cache=5s" {
		t.Fatalf("rules: exit %d\n%s", code, out)
	}
}

func TestInstances(t *testing.T) {
	f, srv := serve(t, map[string]answer{"GET /api/v1/coordination": {200, `{"enabled":false}`}})
	code, out, _ := ctl(t, "--admin", srv.URL, "instances")
	if code != 0 || out != "coordination is off: this Vigil acts alone (docs/ha.md)\n" {
		t.Fatalf("off: exit %d, %q", code, out)
	}
	f.set("GET /api/v1/coordination", answer{200, `{"enabled":true,
		"lease":{"instance":"v1","lease":"694d","valid_for_ns":2500000000,"instances":[{"name":"v1","admin":"h1:6080","proxies":["h1:3306"]}]},
		"clusters":{"main":{"leader":"v1","acting":true,"record":{"term":3,"writer":"db1","phase":"steady","fenced":["db0"]},"writes":"yes",
		"views":[{"instance":"v1","at":"2026-11-27T10:00:00Z","servers":{"db1":{"ok":true}}}]}}}`})
	code, out, _ = ctl(t, "--admin", srv.URL, "instances")
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"this instance: v1, lease 694d (sure for 2.5s)", "INSTANCE ADMIN PROXIES v1 h1:6080 h1:3306",
		"what each instance sees of cluster main", "v1 db1 answers"} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if row := strings.Fields(strings.Split(out, "CLUSTER")[1]); code != 0 || !strings.Contains(strings.Join(row, " "), "main v1 (this one) 3 db1 steady db0 yes") {
		t.Errorf("exit %d, cluster row in:\n%s", code, out)
	}
}

// An operation refused before it reaches the daemon (authentication,
// a body the API cannot read) answers {"error": ...}, not an OpResult:
// its message is shown, never an empty "vigil ctl: ".
func TestOperationHTTPError(t *testing.T) {
	_, srv := serve(t, map[string]answer{
		"POST /api/v1/switchover": {401, `{"error":"unauthorized: send Authorization: Bearer <token>"}`},
		"POST /api/v1/ack":        {400, `{"error":"body must be JSON"}`},
		"POST /api/v1/rejoin/db1": {502, "bad gateway"},
	})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"switchover"}, "vigil ctl: unauthorized: send Authorization: Bearer <token> (HTTP 401)\n"},
		{[]string{"ack"}, "vigil ctl: body must be JSON (HTTP 400)\n"},
		{[]string{"rejoin", "db1"}, "vigil ctl: bad gateway (HTTP 502)\n"},
	} {
		code, out, errs := ctl(t, append([]string{"--admin", srv.URL}, tc.args...)...)
		if code != 1 || out != "" || errs != tc.want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errs, tc.want)
		}
	}
}

// TestNamesEscaped: cluster and server names that mean something in a URL
// ('&', '#', '?', '/', spaces) reach the API as typed, not as a broken or
// different request.
func TestNamesEscaped(t *testing.T) {
	ok := answer{200, `{"ok":true}`}
	f, srv := serve(t, map[string]answer{
		"POST /api/v1/rejoin/db 1#a": ok,
		"DELETE /api/v1/servers/x?y": ok,
		"GET /api/v1/events":         {200, `[]`},
	})
	for _, tc := range []struct {
		args   []string
		method string
		path   string
		query  map[string]string
	}{
		{[]string{"--cluster", "a&b", "rejoin", "db 1#a"}, "POST", "/api/v1/rejoin/db 1#a", map[string]string{"cluster": "a&b"}},
		{[]string{"--cluster", "c=d", "server", "remove", "x?y"}, "DELETE", "/api/v1/servers/x?y", map[string]string{"cluster": "c=d"}},
		{[]string{"--cluster", "m#1", "events", "--server", "n&2", "--kind", "a b"}, "GET", "/api/v1/events",
			map[string]string{"cluster": "m#1", "server": "n&2", "kind": "a b", "limit": "50"}},
	} {
		code, out, errs := ctl(t, append([]string{"--admin", srv.URL}, tc.args...)...)
		if code != 0 || errs != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tc.args, code, out, errs)
			continue
		}
		r := f.last(t)
		q, err := url.ParseQuery(r.Query)
		if err != nil || r.Method != tc.method || r.Path != tc.path {
			t.Errorf("%v: sent %s %s?%s (%v); want %s %s", tc.args, r.Method, r.Path, r.Query, err, tc.method, tc.path)
			continue
		}
		for k, v := range tc.query {
			if q.Get(k) != v {
				t.Errorf("%v: query %s=%q, want %q (raw %s)", tc.args, k, q.Get(k), v, r.Query)
			}
		}
	}
}
