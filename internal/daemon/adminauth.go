package daemon

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
)

// tokenFile, in state_dir, holds the admin token Vigil generates when the
// config sets neither admin.token nor admin.user (and admin.auth is not
// none): the admin API never runs open by default.
const tokenFile = "admin-token"

// adminOptions are the admin server's options for cfg. With no
// credentials configured the token comes from STATE_DIR/admin-token,
// generated (0600) the first time; generated reports that.
func adminOptions(cfg *config.Config) (o admin.Options, generated string, err error) {
	a := cfg.Admin
	o = admin.Options{Listen: a.Listen, Token: a.Token, User: a.User, Password: a.Password, NoAuth: a.Auth == "none"}
	if t := a.TLS; t != nil {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return o, "", fmt.Errorf("admin.tls: %w", err)
		}
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if o.NoAuth || o.Token != "" || o.User != "" {
		return o, "", nil
	}
	path := filepath.Join(cfg.StateDir, tokenFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if o.Token = strings.TrimSpace(string(data)); o.Token == "" {
			return o, "", fmt.Errorf("%s is empty: delete it (Vigil writes a new token) or set admin.token", path)
		}
		return o, "", nil
	case !errors.Is(err, os.ErrNotExist):
		return o, "", fmt.Errorf("admin token: %w", err)
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return o, "", err
	}
	o.Token = hex.EncodeToString(b)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return o, "", fmt.Errorf("admin token: %w", err)
	}
	if err := os.WriteFile(path, []byte(o.Token+"\n"), 0o600); err != nil {
		return o, "", fmt.Errorf("admin token: %w", err)
	}
	return o, path, nil
}
