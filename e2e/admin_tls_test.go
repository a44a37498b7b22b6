package e2e

import (
	"crypto/tls"
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

// TestAdminTLSAndBasicAuth serves the admin API over HTTPS with basic-auth
// credentials from the config, and drives it with curl-like requests and
// vigil ctl.
func TestAdminTLSAndBasicAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	sb := Sandbox(t, sandbox.Options{Topology: sandbox.Standalone, Nodes: 1})
	cfg, err := config.Load(sb.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	cert, key := selfSignedCert(t, sb.Dir())
	cfg.Admin.TLS = &config.TLS{Cert: cert, Key: key}
	cfg.Admin.User, cfg.Admin.Password = "ops", "ops-pass-123"
	data, _ := cfg.Marshal()
	path := filepath.Join(sb.Dir(), "vigil-tls.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	startVigil(t, path, cfg.Clusters[0].Listen)
	base := "https://" + cfg.Admin.Listen
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	status := func(user, pass, path string) int {
		req, _ := http.NewRequest("GET", base+path, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		var resp *http.Response
		Eventually(t, 15*time.Second, "the admin API over TLS", func() error {
			var err error
			resp, err = client.Do(req)
			return err
		})
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
		return resp.StatusCode
	}
	if got := status("", "", "/healthz"); got != 200 {
		t.Errorf("healthz over TLS: %d", got)
	}
	if got := status("", "", "/api/v1/servers"); got != 401 {
		t.Errorf("no credentials: %d, want 401", got)
	}
	if got := status("ops", "wrong", "/api/v1/servers"); got != 401 {
		t.Errorf("wrong password: %d, want 401", got)
	}
	if got := status("ops", "ops-pass-123", "/api/v1/servers"); got != 200 {
		t.Errorf("basic auth: %d, want 200", got)
	}
	// Plain HTTP to the TLS port fails.
	if resp, err := http.Get("http://" + cfg.Admin.Listen + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("the admin API answered plain HTTP")
		}
	}
	ctl := func(args ...string) (string, error) {
		res, err := RunVigil(t, append([]string{"ctl", "--admin", base}, args...)...)
		if err == nil && res.ExitCode != 0 {
			err = &exitError{res.ExitCode}
		}
		return res.Stdout + res.Stderr, err
	}
	if out, err := ctl("--insecure", "--user", "ops", "--password", "ops-pass-123", "servers"); err != nil || !strings.Contains(out, "node1") {
		t.Errorf("ctl over TLS with basic auth: %v\n%s", err, out)
	}
	if out, err := ctl("--cacert", cert, "--user", "ops", "--password", "ops-pass-123", "servers"); err != nil || !strings.Contains(out, "node1") {
		t.Errorf("ctl with --cacert: %v\n%s", err, out)
	}
	if out, err := ctl("--user", "ops", "--password", "ops-pass-123", "servers"); err == nil {
		t.Errorf("ctl trusted a self-signed certificate without --cacert:\n%s", out)
	}
	if out, err := ctl("--insecure", "servers"); err == nil || !strings.Contains(out, "401") {
		t.Errorf("ctl without credentials: %v\n%s", err, out)
	}
}

type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
