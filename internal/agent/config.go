// Package agent owns `vigil agent`: the small daemon that runs on each
// database host and is the only part of Vigil that touches a datadir. It
// serves a fixed set of operations (status, stop, start, backup stream,
// restore, cleanup) over HTTPS with mutual TLS, one mutating operation at a
// time, with an audit line for each; and the Go client Vigil uses to call
// it. docs/lifecycle.md describes it for operators, docs/security.md its
// threat model.
package agent

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the agent's file (vigil agent run --config FILE).
type Config struct {
	// Listen is host:port of the HTTPS listener. Keep it on a private
	// interface and firewalled to Vigil's hosts (docs/security.md).
	Listen string `yaml:"listen"`
	TLS    TLS    `yaml:"tls"`
	// Token, or TokenFile, is an optional bearer token required on top of
	// the client certificate (defence in depth, never instead of it).
	Token     string `yaml:"token,omitempty"`
	TokenFile string `yaml:"token_file,omitempty"`
	// AuditLog receives one JSON line per operation (also written to
	// stderr).
	AuditLog string `yaml:"audit_log,omitempty"`
	// Datadir is the server's data directory.
	Datadir string `yaml:"datadir"`
	// PIDFile, when set, is the server's pid file: a live pid in it means
	// the server runs even when it does not answer.
	PIDFile string `yaml:"pid_file,omitempty"`
	// Server is how the agent logs in to the local server (read_only,
	// replica or not, version; and mariadb-backup's login).
	Server   ServerLogin `yaml:"server"`
	Commands Commands    `yaml:"commands"`
	Binaries Binaries    `yaml:"binaries,omitempty"`
	// TmpDir holds mariadb-backup's scratch directory during a backup;
	// default the system's temporary directory.
	TmpDir string `yaml:"tmp_dir,omitempty"`
	// MaxRate caps a backup stream in bytes per second whatever the
	// request asks; 0 means no cap.
	MaxRate int64 `yaml:"max_rate,omitempty"`
}

// TLS are PEM files: the CA that signs both sides, and the agent's own
// certificate and key.
type TLS struct {
	CA   string `yaml:"ca"`
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// ServerLogin is the local server's login. Socket wins over host and port.
type ServerLogin struct {
	Socket       string `yaml:"socket,omitempty"`
	Host         string `yaml:"host,omitempty"`
	Port         int    `yaml:"port,omitempty"`
	User         string `yaml:"user"`
	Password     string `yaml:"password,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
}

// Commands start and stop the server. They come from this file only,
// never from a request.
type Commands struct {
	Start   []string      `yaml:"start"`
	Stop    []string      `yaml:"stop"`
	Timeout time.Duration `yaml:"timeout"`
}

// Binaries are the programs the agent runs (names are looked up in PATH).
type Binaries struct {
	MariadbBackup string `yaml:"mariadb_backup,omitempty"`
	Mbstream      string `yaml:"mbstream,omitempty"`
	Mariadbd      string `yaml:"mariadbd,omitempty"`
}

// LoadConfig reads, defaults and validates FILE.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("agent config %s: %w", path, err)
	}
	return c, nil
}

var unknownKey = regexp.MustCompile(`field (\S+) not found in type agent\.\w+`)

// ParseConfig decodes strictly (unknown keys are errors), applies
// defaults, reads the password and token files and validates.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), "yaml: "), "unmarshal errors:\n")
		msg = unknownKey.ReplaceAllString(msg, `unknown key "$1" (check the spelling; docs/lifecycle.md lists every key)`)
		return nil, errors.New(strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " "))
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := c.readSecrets(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) applyDefaults() {
	if c.Server.User == "" {
		c.Server.User = "root"
	}
	if c.Server.Socket == "" && c.Server.Host == "" {
		c.Server.Socket = "/run/mysqld/mysqld.sock"
	}
	if c.Server.Host != "" && c.Server.Port == 0 {
		c.Server.Port = 3306
	}
	if len(c.Commands.Start) == 0 {
		c.Commands.Start = []string{"systemctl", "start", "mariadb"}
	}
	if len(c.Commands.Stop) == 0 {
		c.Commands.Stop = []string{"systemctl", "stop", "mariadb"}
	}
	if c.Commands.Timeout == 0 {
		c.Commands.Timeout = 10 * time.Minute
	}
	if c.Binaries.MariadbBackup == "" {
		c.Binaries.MariadbBackup = "mariadb-backup"
	}
	if c.Binaries.Mbstream == "" {
		c.Binaries.Mbstream = "mbstream"
	}
	if c.Binaries.Mariadbd == "" {
		c.Binaries.Mariadbd = "mariadbd"
	}
	if c.TmpDir == "" {
		c.TmpDir = os.TempDir()
	}
}

// Validate returns every problem at once, each with its key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, a...)))
	}
	if c.Listen == "" {
		bad("listen", "required (host:port, e.g. 10.0.0.5:7480)")
	} else if _, port, err := net.SplitHostPort(c.Listen); err != nil || port == "" {
		bad("listen", "%q is not host:port", c.Listen)
	}
	for key, v := range map[string]string{"tls.ca": c.TLS.CA, "tls.cert": c.TLS.Cert, "tls.key": c.TLS.Key} {
		if v == "" {
			bad(key, "required: mutual TLS is mandatory (create the files with vigil agent init)")
		}
	}
	if c.Token != "" && c.TokenFile != "" {
		bad("token", "set token or token_file, not both")
	}
	if c.Datadir == "" {
		bad("datadir", "required")
	} else if !filepath.IsAbs(c.Datadir) || filepath.Clean(c.Datadir) == "/" {
		bad("datadir", "%q must be an absolute path below /", c.Datadir)
	}
	if c.Server.Password != "" && c.Server.PasswordFile != "" {
		bad("server.password", "set password or password_file, not both")
	}
	if c.Server.Port < 0 || c.Server.Port > 65535 {
		bad("server.port", "%d is not a port", c.Server.Port)
	}
	if c.Commands.Timeout < 0 {
		bad("commands.timeout", "must be positive")
	}
	if c.MaxRate < 0 {
		bad("max_rate", "must be 0 (no cap) or bytes per second")
	}
	if c.PIDFile != "" && !filepath.IsAbs(c.PIDFile) {
		bad("pid_file", "%q must be an absolute path", c.PIDFile)
	}
	// Map iteration above is unordered; keep messages stable.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

func (c *Config) readSecrets() error {
	if c.TokenFile != "" {
		data, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("token_file: %w", err)
		}
		c.Token = strings.TrimSpace(string(data))
		if c.Token == "" {
			return fmt.Errorf("token_file: %s is empty", c.TokenFile)
		}
	}
	if c.Server.PasswordFile != "" {
		data, err := os.ReadFile(c.Server.PasswordFile)
		if err != nil {
			return fmt.Errorf("server.password_file: %w", err)
		}
		c.Server.Password = strings.TrimRight(string(data), "\r\n")
	}
	return nil
}

// salvageHoldPath is the file whose presence makes restore refuse: the
// salvage of this server's extra transactions is not finished. It lives
// beside the datadir so that swapping datadirs never moves it.
func (c *Config) salvageHoldPath() string {
	return filepath.Join(filepath.Dir(filepath.Clean(c.Datadir)), SalvageHoldFile)
}

// SalvageHoldFile is the name of the salvage hold beside the datadir.
const SalvageHoldFile = "vigil-salvage-hold"
