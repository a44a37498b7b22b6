package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// A reload applies all of the new configuration or none of it: failover
// settings take effect at once, caching_sha2_password over plain TCP
// keeps working (the RSA key survives), and a config with one part that
// cannot be built (a TLS file that does not load) changes nothing.
func TestReloadAppliesAllOrNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Clusters[0].AuthPlugin = "caching_sha2_password"
		c.Clusters[0].Failover.MinInterval = config.Duration{Duration: time.Second}
		c.Users = append(c.Users, config.User{Name: "fresh0", Password: "pw", BackendUser: "app", BackendPassword: "app"})
		for i := 1; i <= 6; i++ {
			c.Users = append(c.Users, config.User{Name: fmt.Sprintf("fresh%d", i), Password: "pw", BackendUser: "app", BackendPassword: "app"})
		}
	})
	cfgPath := filepath.Join(env.sb.Dir(), "vigil-e2e.yaml")
	load := func() *config.Config {
		c, err := config.Load(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	write := func(c *config.Config) {
		data, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Full caching_sha2_password authentication over plain TCP: each
	// freshN user logs in for the first time (no fast-path cache), so the
	// client gets Vigil's RSA public key and sends the password with it.
	login := func(n int) {
		t.Helper()
		db := openDB(t, fmt.Sprintf("fresh%d:pw@tcp(%s)/vigil_test?timeout=5s&allowCleartextPasswords=0", n, env.addr))
		defer db.Close()
		var v string
		if err := db.QueryRow("SELECT 'sha2'").Scan(&v); err != nil || v != "sha2" {
			t.Fatalf("caching_sha2_password login of fresh%d over plain TCP: %q %v", n, v, err)
		}
	}
	login(0)
	for i := 1; i <= 5; i++ {
		if out, err := env.ctl(t, "reload"); err != nil {
			t.Fatalf("reload %d: %v\n%s", i, err, out)
		}
		login(i)
	}

	// A config whose TLS files do not load is rejected whole: the rule and
	// the user it also adds are not there afterwards.
	good := load()
	bad := load()
	bad.Clusters[0].TLS = &config.TLS{Cert: filepath.Join(env.sb.Dir(), "missing.pem"), Key: filepath.Join(env.sb.Dir(), "missing.key")}
	bad.Clusters[0].Rules = append(bad.Clusters[0].Rules, config.Rule{Name: "added-by-bad-reload", Match: config.RuleMatch{Query: "^SELECT 'never'"}, Route: "writer"})
	bad.Users = append(bad.Users, config.User{Name: "added", Password: "pw", BackendUser: "app", BackendPassword: "app"})
	badYAML, err := bad.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// The validate API builds the parts as a reload would (it used to
	// parse the file only and accept this one).
	token := good.Admin.Token
	req, _ := http.NewRequest("POST", "http://"+env.admin+"/api/v1/config/validate", strings.NewReader(string(badYAML)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/yaml")
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || !strings.Contains(string(body), "clusters[0]") {
			t.Errorf("config/validate of a config whose TLS files do not load: %d %s", resp.StatusCode, body)
		}
	}
	write(bad)
	if out, err := env.ctl(t, "reload"); err == nil || !strings.Contains(out, "clusters[0]") {
		t.Fatalf("reload with a TLS file that does not load: %v\n%s", err, out)
	}
	if out, _ := env.ctl(t, "rules"); strings.Contains(out, "added-by-bad-reload") {
		t.Errorf("a rejected reload installed its rule:\n%s", out)
	}
	added := openDB(t, fmt.Sprintf("added:pw@tcp(%s)/vigil_test?timeout=5s", env.addr))
	if err := added.Ping(); err == nil {
		t.Errorf("a rejected reload installed its user")
	}
	added.Close()
	login(6)

	// failover.auto off by reload: the primary dies, nothing is promoted
	// and the event says why; on again: it fails over.
	good.Clusters[0].Failover.Auto = false
	write(good)
	if out, err := env.ctl(t, "reload"); err != nil {
		t.Fatalf("reload auto=false: %v\n%s", err, out)
	}
	old := env.writer(t)
	if err := env.sb.Kill(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 20*time.Second, "the AutoFailoverOff event", func() error {
		if ev := env.events(t); !strings.Contains(ev, "failover.auto: false") {
			return fmt.Errorf("no AutoFailoverOff event yet")
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	if w := env.writer(t); w != "" {
		t.Fatalf("with failover.auto off, %s became the writer", w)
	}
	good.Clusters[0].Failover.Auto = true
	write(good)
	if out, err := env.ctl(t, "reload"); err != nil {
		t.Fatalf("reload auto=true: %v\n%s", err, out)
	}
	Eventually(t, 20*time.Second, "a failover after auto is back on", func() error {
		if w := env.writer(t); w == "" || w == old {
			return fmt.Errorf("writer %q", w)
		}
		return nil
	})
}

// `vigil config validate FILE` checks a file offline as a start or a
// reload would: a TLS file that does not load is an error with its key.
func TestConfigValidateCommand(t *testing.T) {
	dir := t.TempDir()
	good := `clusters:
  - name: main
    listen: 127.0.0.1:16033
    servers:
      - {name: n1, address: 127.0.0.1:13306, role: primary}
      - {name: n2, address: 127.0.0.1:13307, role: replica}
users:
  - {name: app, password: app}
`
	bad := strings.Replace(good, "    servers:", "    tls: {cert: "+dir+"/none.pem, key: "+dir+"/none.key}\n    servers:", 1)
	for _, c := range []struct {
		yaml, want string
		code       int
	}{{good, "valid", 0}, {bad, "clusters[0]: tls", 1}} {
		path := filepath.Join(dir, fmt.Sprintf("v%d.yaml", c.code))
		if err := os.WriteFile(path, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := RunVigil(t, "config", "validate", path)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != c.code || !strings.Contains(res.Stdout+res.Stderr, c.want) {
			t.Errorf("config validate %s: exit %d, %q; want %d and %q", path, res.ExitCode, res.Stdout+res.Stderr, c.code, c.want)
		}
	}
}
