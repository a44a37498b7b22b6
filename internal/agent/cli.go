package agent

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
)

const agentUsage = `vigil agent — the datadir agent of one database host (docs/lifecycle.md)

Usage:
  vigil agent run --config FILE
  vigil agent init --dir DIR [--hosts 127.0.0.1,localhost,db1.example]
  vigil agent status --addr HOST:PORT --certs DIR [--token-file FILE]

Commands:
  run     serve the agent's fixed operations (status, stop, start, backup,
          restore, cleanup) over HTTPS with mutual TLS, as FILE says
  init    create a CA, the agent's server certificate (valid for --hosts)
          and Vigil's client certificate in DIR (files 0600; never
          overwrites): ca.crt ca.key agent.crt agent.key vigil.crt vigil.key
  status  ask an agent what it sees, with the client certificate of DIR
`

// Command is `vigil agent ARGS`.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "vigil agent: %v\n", err)
		return 1
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, agentUsage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet("vigil agent "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, agentUsage)
		return 0
	case "run":
		path := fs.String("config", "", "agent config file (YAML)")
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if *path == "" {
			return fail(errors.New("run: --config FILE is required"))
		}
		if err := Run(ctx, *path, stderr); err != nil {
			return fail(err)
		}
		return 0
	case "init":
		dir := fs.String("dir", "", "directory for the certificates")
		hosts := fs.String("hosts", "127.0.0.1,localhost", "comma-separated IPs and names the agent's certificate is valid for")
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if *dir == "" {
			return fail(errors.New("init: --dir DIR is required"))
		}
		f, err := Init(InitOptions{Dir: *dir, Hosts: splitList(*hosts)})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "CA %s (key %s: keep it offline once certificates are issued)\n", f.CA, f.CAKey)
		fmt.Fprintf(stdout, "agent certificate %s, key %s (for: %s)\n", f.AgentCert, f.AgentKey, *hosts)
		fmt.Fprintf(stdout, "Vigil's client certificate %s, key %s\n", f.ClientCert, f.ClientKey)
		return 0
	case "status":
		addr := fs.String("addr", "", "agent host:port")
		certs := fs.String("certs", "", "directory with ca.crt, vigil.crt and vigil.key")
		tokenFile := fs.String("token-file", "", "bearer token file, when the agent wants one")
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if *addr == "" || *certs == "" {
			return fail(errors.New("status: --addr and --certs are required"))
		}
		cc := ClientConfig{Addr: *addr, CA: filepath.Join(*certs, CAFile),
			Cert: filepath.Join(*certs, ClientCertFile), Key: filepath.Join(*certs, ClientKeyFile)}
		if *tokenFile != "" {
			data, err := os.ReadFile(*tokenFile)
			if err != nil {
				return fail(err)
			}
			cc.Token = strings.TrimSpace(string(data))
		}
		c, err := NewClient(cc)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		st, err := c.Status(ctx)
		if err != nil {
			return fail(err)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		return 0
	}
	fmt.Fprintf(stderr, "vigil agent: unknown command %q\n\n%s", cmd, agentUsage)
	return 2
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Run serves the agent of the config file until ctx ends.
func Run(ctx context.Context, path string, stderr io.Writer) error {
	cfg, err := LoadConfig(path)
	if err != nil {
		return err
	}
	audit := stderr
	if cfg.AuditLog != "" {
		f, err := os.OpenFile(cfg.AuditLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("audit_log: %w", err)
		}
		defer f.Close()
		audit = io.MultiWriter(f, stderr)
	}
	s, err := NewServer(cfg, audit)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	s.audit.Info("agent", "op", "listen", "outcome", "ok", "addr", ln.Addr().String(), "datadir", cfg.Datadir)
	// A restore this agent did not finish (killed during extract or
	// prepare) left a directory that was never swapped in.
	if removed, err := s.removeInterrupted(); err != nil {
		s.audit.Warn("agent", "op", "remove_interrupted", "outcome", "failed", "removed", removed, "error", err.Error())
	} else if len(removed) > 0 {
		s.audit.Info("agent", "op", "remove_interrupted", "outcome", "ok", "removed", removed)
	}
	return s.Serve(ctx, ln)
}
