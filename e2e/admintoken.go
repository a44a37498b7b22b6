package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/vigil-db/vigil/internal/config"
)

// adminTokens maps a Vigil's admin address to its token: the admin API
// always needs one (the config's admin.token, or STATE_DIR/admin-token,
// which Vigil generates). Tests that call the API without credentials on
// purpose set an Authorization header themselves (an empty Bearer).
var adminTokens sync.Map

// rememberAdminToken records the admin token of the Vigil that serves
// cfgPath; the token file is read lazily (Vigil writes it at start).
func rememberAdminToken(cfgPath string) {
	cfg, err := config.Load(cfgPath)
	if err != nil || !cfg.Admin.AdminEnabled() || cfg.Admin.User != "" {
		return // basic-auth configs are about credentials: nothing is added
	}
	tok := cfg.Admin.Token
	if tok == "" {
		tok = "file:" + filepath.Join(cfg.StateDir, "admin-token")
	}
	adminTokens.Store(cfg.Admin.Listen, tok)
}

// adminToken is the token for an admin address, "" when unknown.
func adminToken(addr string) string {
	v, ok := adminTokens.Load(addr)
	if !ok {
		return ""
	}
	tok := v.(string)
	if path, ok := strings.CutPrefix(tok, "file:"); ok {
		data, _ := os.ReadFile(path)
		return strings.TrimSpace(string(data))
	}
	return tok
}

// tokenTransport adds the admin token to requests that carry no
// Authorization header.
type tokenTransport struct{ base http.RoundTripper }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if _, set := r.Header["Authorization"]; !set {
		if tok := adminToken(r.URL.Host); tok != "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	return t.base.RoundTrip(r)
}

func init() { http.DefaultTransport = tokenTransport{base: http.DefaultTransport} }
