package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// renderCases are configs that use most keys: what Minimal must carry
// through Parse unchanged.
var renderCases = map[string]string{
	"sandbox replication": `
state_dir: /tmp/sb/state
log: {level: info, format: text}
admin: {listen: 127.0.0.1:16091}
users: [{name: app, password: app}]
clusters:
  - name: sandbox
    type: replication
    listen: 127.0.0.1:16090
    servers:
      - {name: node1, address: 127.0.0.1:16000, role: primary, datadir: /tmp/sb/node1/data}
      - {name: node2, address: 127.0.0.1:16010, role: replica, datadir: /tmp/sb/node2/data}
      - {name: node3, address: 127.0.0.1:16020, role: replica, datadir: /tmp/sb/node3/data}
    monitor: {user: monitor, password: monitor}
    failover: {auto: true, repl_user: repl, repl_password: repl}
`,
	"galera": `
users: [{name: app, password: app}]
clusters:
  - name: g
    type: galera
    listen: 127.0.0.1:6033
    servers:
      - {name: g1, address: 10.0.0.1:3306, weight: 3}
      - {name: g2, address: 10.0.0.2:3306}
      - {name: g3, address: 10.0.0.3:3306, tls: true}
    monitor: {user: monitor, password: "p w", interval: 1s, timeout: 2s, fail_after: 3, recover_after: 1, lone_writer_grace: -1s}
    pool: {min_idle: 2, max_open: 50, idle_timeout: 1s, max_lifetime: 90m, validate_idle: 1m30s}
`,
	"users, rules, tls, query log": `
state_dir: /var/lib/vigil
log:
  level: debug
  format: json
  queries: true
  auth: false
  statements: full
  buffer: 1024
  file: {path: /var/log/vigil/q.jsonl, max_size: 100MiB, max_age: 24h, keep: 3}
  stdout: true
  kafka: {brokers: ["k1:9092", "k2:9092"], topic: vigil-queries, compression: zstd, client_id: me, max_buffered: 5, linger: 20ms}
admin:
  listen: 0.0.0.0:6080
  token: "s3cret: with colon"
  user: ops
  password: "#not a comment"
  tls: {cert: /etc/vigil/a.crt, key: /etc/vigil/a.key}
users:
  - {name: app, password: "*0123456789ABCDEF0123456789ABCDEF01234567", backend_user: app_be, backend_password: "'quoted'"}
  - {name: reporting, password: "", default_schema: shop, read_your_writes: none, session_window: 5s, multiplexing: false, require_tls: true}
  - {name: batch, password: x, read_your_writes: gtid, multiplexing: true}
digests: {enabled: false, max_entries: 500}
query_cache: {max_size: 1GiB, max_entry_size: 1000}
clusters:
  - name: main
    listen: 127.0.0.1:6033
    server_version: 10.11.6-MariaDB
    auth_plugin: caching_sha2_password
    tls: {cert: server.pem, key: server.key}
    connect_timeout: 3s
    servers:
      - {name: n1, address: "[::1]:3306", role: primary}
      - {name: n2, address: db2:3306, role: replica, standby: true}
      - {name: n3, address: db3:3306, role: replica}
    routing: {reads_on_primary: true, gtid_wait_timeout: 250ms}
    failover:
      auto: false
      detect_after: 5s
      min_interval: 1s
      candidates: [n3]
      never_promote: [n2]
      pre_failover: /usr/local/bin/pre
      fence_command: "fence --host $VIGIL_OLD_PRIMARY_ADDR"
      max_running_seconds: 0.5
      semi_sync: {manage: "on", async_without_replica: true, timeout: 10s}
    server_groups: {analytics: [n3], shadow: [n2, n3]}
    rules:
      - name: reports
        match: {user: reporting, digest: "^SELECT .* FROM report"}
        route: analytics
        timeout: 30s
      - match: {query: "^DELETE", client: "!10.0.0.0/8"}
        block: {}
      - name: secret
        match: {schema: hr}
        block: {code: 1142, sqlstate: "42000", message: "no"}
      - name: cached
        match: {digest: "FROM config"}
        cache_ttl: 5s
        log: false
        continue: true
      - name: rewrite
        rewrite: {pattern: "SELECT \\*", replace: "SELECT id"}
        mirror: shadow
        log: true
  - name: second
    type: read-only
    listen: 127.0.0.1:6034
    servers: [{name: r1, address: 127.0.0.1:3310}]
    rules: [{name: only, route: reader}]
`,
}

// eachCase runs test on every renderCases config, parsed.
func eachCase(t *testing.T, test func(*testing.T, *Config)) {
	for name, src := range renderCases {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			test(t, c)
		})
	}
}

func TestMinimalRoundTrip(t *testing.T) {
	eachCase(t, func(t *testing.T, c *Config) {
		out := roundTrip(t, c, c, Minimal)
		again, err := Minimal(c)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("Minimal is not stable (%v):\n%s\n---\n%s", err, out, again)
		}
		checkReadable(t, out)
	})
}

// roundTrip writes c with render, parses the output and checks that it
// gives want (empty lists and maps count as absent); it returns the
// output.
func roundTrip(t *testing.T, c, want *Config, render func(*Config) ([]byte, error)) []byte {
	t.Helper()
	out, err := render(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(out)
	if err != nil {
		t.Fatalf("output does not parse: %v\n%s", err, out)
	}
	nilEmpty(reflect.ValueOf(got))
	nilEmpty(reflect.ValueOf(want))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v\n%s", got, want, out)
	}
	return out
}

var emptyValue = regexp.MustCompile(`(?m):\s*(null|~|''|""|\[\])\s*$`)

// checkReadable: no null or empty value, and no explanation twice.
func checkReadable(t *testing.T, out []byte) {
	t.Helper()
	if m := emptyValue.Find(out); m != nil {
		t.Errorf("output holds %q:\n%s", m, out)
	}
	for path, doc := range keyDocs {
		if n := strings.Count(string(out), "# "+doc+"\n"); n > 1 {
			t.Errorf("%s explained %d times", path, n)
		}
	}
}

func TestMinimalLeavesDefaultsOut(t *testing.T) {
	c, err := Parse([]byte(good + `    pool: {max_open: 100, idle_timeout: 5m}
    monitor: {interval: 500ms, fail_after: 2}
    rules: [{name: rule-1, block: {code: 7007, message: "Vigil: statement blocked by rule rule-1"}}]
log: {level: info, buffer: 65536}
digests: {max_entries: 10000}
`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Minimal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"pool", "max_open", "monitor", "interval", "log:", "digests", "type:", "weight", "code:", "message:", "state_dir"} {
		if bytes.Contains(out, []byte(k)) {
			t.Errorf("default key %q written:\n%s", k, out)
		}
	}
	// A rule keeps its name (list items always do) and its block, empty.
	if !bytes.Contains(out, []byte("- name: rule-1\n")) || !bytes.Contains(out, []byte("block: {}\n")) {
		t.Errorf("rule:\n%s", out)
	}
	// Comments: the first server's keys are explained, the second's not.
	if strings.Count(string(out), "# "+keyDocs["clusters[].servers[].address"]) != 1 {
		t.Errorf("address explained other than once:\n%s", out)
	}
}

// TestMinimalOfUndefaulted: a Config built in code (as the sandbox does),
// zero values for defaults, renders the same as its parsed form.
func TestMinimalOfUndefaulted(t *testing.T) {
	c := &Config{
		Users: []User{{Name: "app", Password: "app"}},
		Clusters: []Cluster{{Name: "c", Listen: "127.0.0.1:1", Servers: []Server{{Name: "s", Address: "127.0.0.1:2"}},
			Failover: Failover{Auto: true}}},
	}
	want := c.clone()
	want.applyDefaults()
	out := roundTrip(t, c, want, Minimal)
	if again, _ := Minimal(want); !bytes.Equal(again, out) {
		t.Errorf("built and parsed configs render differently:\n%s\n---\n%s", out, again)
	}
	if c.Log.Level != "" || c.Clusters[0].Pool.MaxOpen != 0 {
		t.Error("Minimal applied the defaults to its argument")
	}
}

func TestEffective(t *testing.T) {
	eachCase(t, func(t *testing.T, c *Config) {
		want := c.clone()
		want.spellOutSwitches()
		out := roundTrip(t, c, want, func(c *Config) ([]byte, error) { return Effective(c, false) })
		for _, k := range []string{"max_open:", "fail_after:", "read_your_writes:", "max_entry_size:", "min_interval:", "enabled:"} {
			if !bytes.Contains(out, []byte(k)) {
				t.Errorf("effective config lacks %s", k)
			}
		}
		if bytes.Contains(out, []byte("null")) {
			t.Errorf("null in effective config:\n%s", out)
		}
	})
}

// nilEmpty sets every empty slice and map under v to nil.
func nilEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			nilEmpty(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				nilEmpty(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
		} else if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				nilEmpty(v.Index(i))
			}
		}
	}
}

func TestEffectiveMasksSecrets(t *testing.T) {
	c, err := Parse([]byte(renderCases["users, rules, tls, query log"]))
	if err != nil {
		t.Fatal(err)
	}
	c.Clusters[0].Monitor = Monitor{User: "m", Password: "monpass"}
	c.Clusters[0].Failover.ReplUser, c.Clusters[0].Failover.ReplPassword = "r", "replpass"
	c.Coordination.Etcd = Etcd{Endpoints: []string{"127.0.0.1:2379"}, User: "e", Password: "etcdpass"}
	out, err := Effective(c, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s3cret", "#not a comment", "0123456789ABCDEF", "'quoted'", "monpass", "replpass", "etcdpass"} {
		if bytes.Contains(out, []byte(s)) {
			t.Errorf("secret %q shown:\n%s", s, out)
		}
	}
	if n := bytes.Count(out, []byte(Secret)); n != 8 {
		t.Errorf("%d masked values, want 8 (token, admin password, 2 user secrets, x, monitor, repl, etcd):\n%s", n, out)
	}
	// The empty password of "reporting" stays empty: nothing to hide.
	if c.Users[0].Password == Secret {
		t.Error("Effective masked its argument")
	}
}

// TestKeyDocsComplete: every key of the file is explained, and every
// explanation names a key.
func TestKeyDocsComplete(t *testing.T) {
	var paths []string
	var walk func(reflect.Type, string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			p := prefix + key
			paths = append(paths, p)
			ft := f.Type
			if isLeaf(ft) {
				continue
			}
			switch ft.Kind() {
			case reflect.Pointer:
				walk(ft.Elem(), p+".")
			case reflect.Slice:
				walk(ft.Elem(), p+"[].")
			default:
				walk(ft, p+".")
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	for _, p := range paths {
		if keyDocs[p] == "" {
			t.Errorf("key %s has no entry in keyDocs", p)
		}
	}
	for p := range keyDocs {
		if !slices.Contains(paths, p) {
			t.Errorf("keyDocs explains %s, which is not a key", p)
		}
	}
}

func TestMarshalForms(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Hour: "1h", 5 * time.Minute: "5m", 90 * time.Minute: "1h30m",
		500 * time.Millisecond: "500ms", 0: "0s", -5 * time.Second: "-5s", time.Hour + time.Second: "1h0m1s"} {
		if got, _ := (Duration{d}).MarshalYAML(); got != want {
			t.Errorf("%v: %v, want %s", d, got, want)
		}
	}
	for z, want := range map[Size]any{64 << 20: "64MiB", 1 << 30: "1GiB", 3 << 10: "3KiB", 1000: int64(1000), 0: int64(0)} {
		if got, _ := z.MarshalYAML(); got != want {
			t.Errorf("%d: %v, want %v", z, got, want)
		}
	}
}

func TestStarter(t *testing.T) {
	for _, o := range []StarterOptions{
		{},
		{Type: "galera", Listen: "0.0.0.0:3306", Admin: "127.0.0.1:7000", Servers: "a=10.0.0.1:3306, b=10.0.0.2:3306"},
		{Servers: "solo=db:3306"},
	} {
		c, err := Starter(o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		out := roundTrip(t, c, c, RenderStarter)
		checkReadable(t, out)
		for _, k := range []string{"state_dir:", "admin:", "listen:", "type:", "monitor:", "read_your_writes:", starterPassword} {
			if !bytes.Contains(out, []byte(k)) {
				t.Errorf("starter lacks %s:\n%s", k, out)
			}
		}
		// Every key line has its comment above it (or above its dash).
		lines := strings.Split(string(out), "\n")
		explained := map[string]bool{}
		for i, l := range lines {
			key, _, ok := strings.Cut(strings.TrimLeft(strings.TrimSpace(l), "- "), ":")
			if !ok || strings.HasPrefix(strings.TrimSpace(l), "#") || explained[key] {
				continue
			}
			explained[key] = true
			if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
				t.Errorf("key %q (line %d) has no comment:\n%s", key, i+1, out)
			}
		}
	}
	got, _ := Starter(StarterOptions{Type: "galera"})
	if got.Clusters[0].Type != "galera" || got.Clusters[0].Servers[0].Role != "" || got.Clusters[0].Failover.ReplUser != "" {
		t.Errorf("galera starter: %+v", got.Clusters[0])
	}
	got, _ = Starter(StarterOptions{})
	if s := got.Clusters[0].Servers; len(s) != 3 || s[0].Role != "primary" || s[1].Role != "replica" || s[2].Address != "127.0.0.1:3309" {
		t.Errorf("replication starter servers: %+v", s)
	}
	for _, bad := range []StarterOptions{{Type: "sharded"}, {Servers: "a"}, {Servers: "a=nowhere"}, {Servers: "a=h:1,a=h:2"}, {Listen: "x"}} {
		if _, err := Starter(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestInitAndShowCommands(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.yaml")
	var stdout, stderr bytes.Buffer
	if rc := InitCommand([]string{"--out", path, "--servers", "p=127.0.0.1:4000,r=127.0.0.1:4001"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("init: %d %s", rc, stderr.String())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("written file: %v %v", fi, err)
	}
	stderr.Reset()
	if rc := InitCommand([]string{"--out", path}, &stdout, &stderr); rc != 1 || !strings.Contains(stderr.String(), "--force") {
		t.Fatalf("init over an existing file: %d %s", rc, stderr.String())
	}
	if rc := InitCommand([]string{"--out", path, "--force", "--type", "galera"}, &stdout, &stderr); rc != 0 {
		t.Fatalf("init --force: %d %s", rc, stderr.String())
	}
	stdout.Reset()
	if rc := InitCommand(nil, &stdout, &stderr); rc != 0 || !bytes.HasPrefix(stdout.Bytes(), []byte(starterHeader)) {
		t.Fatalf("init to stdout: %d\n%s", rc, stdout.String())
	}
	if rc := InitCommand([]string{"extra"}, &stdout, &stderr); rc != 2 {
		t.Errorf("init with an argument: %d", rc)
	}

	stdout.Reset()
	if rc := ShowCommand([]string{path}, &stdout, &stderr); rc != 0 || !bytes.HasPrefix(stdout.Bytes(), []byte(minimalNote)) ||
		!strings.Contains(stdout.String(), "password: change-me") {
		t.Fatalf("show: %d\n%s", rc, stdout.String())
	}
	stdout.Reset()
	if rc := ShowCommand([]string{"--effective", path}, &stdout, &stderr); rc != 0 || strings.Contains(stdout.String(), "change-me") ||
		!strings.Contains(stdout.String(), "max_open: 100") {
		t.Fatalf("show --effective: %d\n%s", rc, stdout.String())
	}
	stdout.Reset()
	if rc := ShowCommand([]string{"--effective", "--show-secrets", path}, &stdout, &stderr); rc != 0 || !strings.Contains(stdout.String(), "change-me") {
		t.Fatalf("show --effective --show-secrets: %d\n%s", rc, stdout.String())
	}
	stderr.Reset()
	if rc := ShowCommand([]string{filepath.Join(dir, "missing.yaml")}, &stdout, &stderr); rc != 1 || stderr.Len() == 0 {
		t.Errorf("show of a missing file: %d %q", rc, stderr.String())
	}
	if rc := ShowCommand(nil, &stdout, &stderr); rc != 2 {
		t.Errorf("show without a file: %d", rc)
	}
}
