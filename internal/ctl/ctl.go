package ctl

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/coord"
)

const ctlUsage = `vigil ctl — talk to a running Vigil's admin API

Usage: vigil ctl [--admin URL] [--token T | --token-file F | --user U --password P] [--cacert FILE | --insecure] [--json] COMMAND [args]

Commands:
  clusters                      clusters with their writer, term, sessions, running operation
  servers                       servers with role, state, lag, GTID, pool use
  sessions                      client sessions
  events [--server N] [--kind K] [--limit N]
  switchover [--to NODE] [--dry-run]
  failover [--to NODE] [--dry-run] [--force] [--accept-loss]
  ack                           acknowledge a failover so automatic failover may run again
  rejoin NODE                   make a returned old primary a replica of the new primary
  set-state NODE ONLINE|OFFLINE_SOFT|OFFLINE_HARD|STANDBY
                                STANDBY: replicating and monitored, never routed,
                                promoted only when named (kept across restarts);
                                ONLINE ends it
  set-weight NODE N             read weight (0: no reads), kept across restarts
  server add NAME HOST:PORT [--weight N] [--role replica|primary]
             [--agent HOST:PORT [--clone [--from DONOR] [--rate R] [--wait]]]
                                add a server to the running cluster: it joins
                                OFFLINE_SOFT, is routed once Online and caught up;
                                --clone then clones it from a caught-up member
  server remove NAME            drain a server and take it out of the cluster
  clone TARGET [--from DONOR] [--rate BYTES/s] [--wait | --dry-run]
                                overwrite TARGET with a backup of DONOR (default: a
                                caught-up replica) through the vigil agents, make it
                                replicate from the writer, route it again; --wait
                                follows it (exit 1 when it failed)
  rebuild NODE [--from DONOR] [--rate BYTES/s] [--wait | --dry-run]
                                the same onto a member in place (a diverged old
                                primary, a broken replica): first made read-only and
                                what it holds that the primary lacks salvaged to a
                                file; the writer is refused
  clones                        running and recent clones and rebuilds: phase,
                                bytes, rate, ETA
  shards                        the sharded listener: clusters, every schema with
                                its cluster and shard state, statements by cluster
  shard state SCHEMA online|read_only|offline
                                set a schema's shard state: read_only refuses its
                                writes (7018), offline every statement (7019)
  reload                        reload the config file
  kill ID [--query]             end a client session (or only its running statement)
  digests [--by key] [--sort total|count|errors|rows|max|p99] [--limit N] [--reset]
                                statement statistics by digest
  rules                         query rules with their hit counters
  cache [--purge]               query cache usage (or empty it)
  querylog                      query log counters (written, dropped per sink)
  instances                     Vigil instances coordinated through etcd: this one's
                                lease, the others, per cluster the acting instance,
                                term, writer and whether this one routes writes,
                                and what each instance sees of each server

The admin address comes from --admin, else $VIGIL_ADMIN, else
--sandbox DIR (its sandbox.json), else http://127.0.0.1:6080.
The token comes from --token or $VIGIL_ADMIN_TOKEN, or from the file
--token-file (or $VIGIL_ADMIN_TOKEN_FILE; with --sandbox DIR, the sandbox's
token); basic-auth credentials
from --user/--password or $VIGIL_ADMIN_USER/$VIGIL_ADMIN_PASSWORD. For an
admin API served over TLS use an https:// URL, with --cacert for a private
CA (or --insecure to skip verification).
`

// Command is `vigil ctl ARGS`.
func Command(ctx context.Context, args []string) int {
	return run(ctx, args, os.Stdout, os.Stderr)
}

// run is Command printing to stdout and stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("ctl", stderr)
	fs.Usage = func() { fmt.Fprint(stderr, ctlUsage) }
	addr := fs.String("admin", os.Getenv("VIGIL_ADMIN"), "admin URL")
	token := fs.String("token", os.Getenv("VIGIL_ADMIN_TOKEN"), "admin token")
	tokenFile := fs.String("token-file", os.Getenv("VIGIL_ADMIN_TOKEN_FILE"), "file holding the admin token (STATE_DIR/admin-token, which Vigil generates when the config sets none)")
	sbDir := fs.String("sandbox", os.Getenv("VIGIL_SANDBOX_DIR"), "sandbox directory whose admin address to use")
	user := fs.String("user", os.Getenv("VIGIL_ADMIN_USER"), "basic-auth user (admin.user)")
	password := fs.String("password", os.Getenv("VIGIL_ADMIN_PASSWORD"), "basic-auth password (admin.password)")
	cacert := fs.String("cacert", "", "PEM file of the CA that signed the admin API's certificate")
	insecure := fs.Bool("insecure", false, "do not verify the admin API's TLS certificate")
	asJSON := fs.Bool("json", false, "print JSON")
	cluster := fs.String("cluster", "", "cluster name (when Vigil serves several)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fmt.Fprint(stderr, ctlUsage)
		return 2
	}
	base, err := adminURL(*addr, *sbDir)
	if err != nil {
		fmt.Fprintf(stderr, "vigil ctl: %v\n", err)
		return 1
	}
	if *tokenFile == "" && *token == "" && *user == "" && *sbDir != "" && *addr == "" {
		*token = sandboxToken(*sbDir)
	}
	if *tokenFile != "" && *token == "" {
		data, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(stderr, "vigil ctl: admin token: %v\n", err)
			return 1
		}
		*token = strings.TrimSpace(string(data))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if *cacert != "" || *insecure {
		tc := &tls.Config{InsecureSkipVerify: *insecure} //nolint:gosec // the operator asked for it
		if *cacert != "" {
			pem, err := os.ReadFile(*cacert)
			if err != nil {
				fmt.Fprintf(stderr, "vigil ctl: %v\n", err)
				return 1
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				fmt.Fprintf(stderr, "vigil ctl: %s holds no PEM certificate\n", *cacert)
				return 1
			}
		}
		tr.TLSClientConfig = tc
	}
	c := &ctlClient{out: stdout, errw: stderr, base: base, token: *token, user: *user, password: *password, json: *asJSON,
		http: &http.Client{Timeout: 5 * time.Minute, Transport: tr}}
	cmd, cargs := rest[0], rest[1:]
	switch cmd {
	case "clusters":
		return c.clusters(ctx)
	case "servers":
		return c.servers(ctx)
	case "sessions":
		return c.get(ctx, "/api/v1/sessions", nil)
	case "events":
		efs := newFlags("events", stderr)
		server := efs.String("server", "", "only this server")
		kind := efs.String("kind", "", "only this kind")
		limit := efs.Int("limit", 50, "at most this many (newest)")
		if err := efs.Parse(cargs); err != nil {
			return 2
		}
		q := "/api/v1/events?" + urlQuery("cluster", *cluster, "server", *server, "kind", *kind, "limit", fmt.Sprint(*limit))
		return c.events(ctx, q)
	case "switchover", "failover":
		ofs := newFlags(cmd, stderr)
		to := ofs.String("to", "", "the replica to promote (default: the best one)")
		dry := ofs.Bool("dry-run", false, "print the plan and the reasons, do nothing")
		force := ofs.Bool("force", false, "failover even though the primary still answers checks")
		acceptLoss := ofs.Bool("accept-loss", false, "failover even though the candidate lacks transactions the old primary is known to have acknowledged")
		if err := ofs.Parse(cargs); err != nil {
			return 2
		}
		return c.op(ctx, "/api/v1/"+cmd, admin.OpRequest{Cluster: *cluster, To: *to, DryRun: *dry, Force: *force, AcceptLoss: *acceptLoss})
	case "ack":
		return c.op(ctx, "/api/v1/ack", admin.OpRequest{Cluster: *cluster})
	case "rejoin":
		if len(cargs) != 1 {
			fmt.Fprintln(stderr, "vigil ctl rejoin NODE")
			return 2
		}
		return c.op(ctx, "/api/v1/rejoin/"+url.PathEscape(cargs[0])+"?"+urlQuery("cluster", *cluster), nil)
	case "set-state":
		if len(cargs) != 2 {
			fmt.Fprintln(stderr, "vigil ctl set-state NODE ONLINE|OFFLINE_SOFT|OFFLINE_HARD|STANDBY")
			return 2
		}
		return c.post(ctx, "/api/v1/servers/"+url.PathEscape(cargs[0])+"/state", map[string]string{"cluster": *cluster, "state": strings.ToUpper(cargs[1])})
	case "clone":
		return c.clone(ctx, *cluster, cargs, "clone")
	case "rebuild":
		return c.clone(ctx, *cluster, cargs, "rebuild")
	case "clones":
		return c.clones(ctx)
	case "shards":
		return c.shards(ctx)
	case "shard":
		return c.shard(ctx, cargs)
	case "reload":
		return c.post(ctx, "/api/v1/config/reload", nil)
	case "server":
		return c.server(ctx, *cluster, cargs)
	case "set-weight":
		var w int
		if len(cargs) != 2 {
			fmt.Fprintln(stderr, "vigil ctl set-weight NODE N")
			return 2
		}
		if _, err := fmt.Sscan(cargs[1], &w); err != nil {
			fmt.Fprintln(stderr, "vigil ctl set-weight NODE N: N must be a number (0: no reads)")
			return 2
		}
		return c.post(ctx, "/api/v1/servers/"+url.PathEscape(cargs[0])+"/weight", map[string]any{"cluster": *cluster, "weight": w})
	case "kill":
		kfs := newFlags("kill", stderr)
		query := kfs.Bool("query", false, "kill only the running statement")
		if len(cargs) < 1 {
			fmt.Fprintln(stderr, "vigil ctl kill ID [--query]")
			return 2
		}
		if err := kfs.Parse(cargs[1:]); err != nil {
			return 2
		}
		return c.send(ctx, "DELETE", "/api/v1/sessions/"+url.PathEscape(cargs[0])+"?"+urlQuery("cluster", *cluster, "query", fmt.Sprint(*query)))
	case "digests":
		dfs := newFlags("digests", stderr)
		by := dfs.String("by", "digest", "digest (one row per digest) or key (per digest, user, schema, hostgroup)")
		sort := dfs.String("sort", "total", "total, count, errors, rows, max or p99")
		limit := dfs.Int("limit", 20, "at most this many rows")
		reset := dfs.Bool("reset", false, "forget the statistics")
		if err := dfs.Parse(cargs); err != nil {
			return 2
		}
		if *reset {
			return c.send(ctx, "DELETE", "/api/v1/digests?"+urlQuery("cluster", *cluster))
		}
		return c.digests(ctx, "/api/v1/digests?"+urlQuery("cluster", *cluster, "by", *by, "sort", *sort, "limit", fmt.Sprint(*limit)))
	case "rules":
		return c.rules(ctx)
	case "cache":
		cfs := newFlags("cache", stderr)
		purge := cfs.Bool("purge", false, "empty the cache")
		if err := cfs.Parse(cargs); err != nil {
			return 2
		}
		if *purge {
			return c.send(ctx, "DELETE", "/api/v1/query_cache")
		}
		return c.get(ctx, "/api/v1/query_cache", nil)
	case "querylog":
		return c.get(ctx, "/api/v1/query_log", nil)
	case "instances":
		return c.instances(ctx)
	default:
		fmt.Fprintf(stderr, "vigil ctl: unknown command %q\n\n%s", cmd, ctlUsage)
		return 2
	}
}

func adminURL(flagAddr, sbDir string) (string, error) {
	a := flagAddr
	if a == "" && sbDir != "" {
		data, err := os.ReadFile(sbDir + "/sandbox.json")
		if err != nil {
			return "", fmt.Errorf("reading the sandbox's admin address: %w", err)
		}
		var m struct {
			Admin struct {
				Host string `json:"host"`
				Port int    `json:"port"`
			} `json:"admin"`
		}
		if err := json.Unmarshal(data, &m); err != nil {
			return "", err
		}
		a = fmt.Sprintf("%s:%d", m.Admin.Host, m.Admin.Port)
	}
	if a == "" {
		a = "127.0.0.1:6080"
	}
	if !strings.Contains(a, "://") {
		a = "http://" + a
	}
	return strings.TrimRight(a, "/"), nil
}

// newFlags is a flag set that reports its errors to stderr.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

type ctlClient struct {
	out, errw      io.Writer // stdout, stderr
	base, token    string
	user, password string
	json           bool
	http           *http.Client
}

func (c *ctlClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	req.Header.Set("Content-Type", "application/json") // the admin API refuses state changes without it
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach Vigil's admin API at %s: %w (is vigil run up? pass --admin)", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func (c *ctlClient) fail(status int, data []byte) int {
	var e struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(data, &e)
	msg := e.Error
	if msg == "" {
		msg = e.Message
	}
	if msg == "" {
		msg = strings.TrimSpace(string(data))
	}
	fmt.Fprintf(c.errw, "vigil ctl: %s (HTTP %d)\n", msg, status)
	return 1
}

func (c *ctlClient) get(ctx context.Context, path string, _ any) int { return c.send(ctx, "GET", path) }

func (c *ctlClient) post(ctx context.Context, path string, body any) int {
	status, data, err := c.do(ctx, "POST", path, body)
	if err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	if status != 200 {
		if c.json {
			c.out.Write(data)
			return 1
		}
		return c.fail(status, data)
	}
	c.out.Write(data)
	return 0
}

// fetch GETs path; with --json it prints the answer and returns done,
// otherwise it decodes it into v for a table.
func (c *ctlClient) fetch(ctx context.Context, path string, v any) (exit int, done bool) {
	status, data, err := c.do(ctx, "GET", path, nil)
	if err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1, true
	}
	if status != 200 {
		return c.fail(status, data), true
	}
	if c.json {
		c.out.Write(data)
		return 0, true
	}
	if err := json.Unmarshal(data, v); err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1, true
	}
	return 0, false
}

func (c *ctlClient) servers(ctx context.Context) int {
	var list []admin.ServerView
	if exit, done := c.fetch(ctx, "/api/v1/servers", &list); done {
		return exit
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tSERVER\tADDRESS\tROLE\tSTATE\tR/W\tWEIGHT\tLAG\tPOOL\tGTID\tREASON")
	for _, s := range list {
		rw := map[bool]string{true: "r", false: "-"}[s.Readable] + map[bool]string{true: "w", false: "-"}[s.Writable]
		if s.Writer {
			rw += "*"
		}
		lag := "-"
		if s.LagSeconds != nil {
			lag = fmt.Sprintf("%.1fs", *s.LagSeconds)
		}
		state := s.State
		if s.Standby {
			state += " (standby)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d/%d\t%s\t%s\n", s.Cluster, s.Name, s.Address, s.Role, state, rw, s.Weight, lag,
			s.Pool.InUse, s.Pool.Open, s.GTID, s.Reason)
	}
	tw.Flush()
	return 0
}

func (c *ctlClient) events(ctx context.Context, path string) int {
	var list []admin.Event
	if exit, done := c.fetch(ctx, path, &list); done {
		return exit
	}
	for _, e := range list {
		where := e.Cluster
		if e.Server != "" {
			where += "/" + e.Server
		}
		fmt.Fprintf(c.out, "%s  %-14s %-18s %s\n", e.Time.Local().Format("2006-01-02 15:04:05.000"), where, e.Kind, e.Message)
	}
	return 0
}

func (c *ctlClient) op(ctx context.Context, path string, body any) int {
	status, data, err := c.do(ctx, "POST", path, body)
	if err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	if c.json {
		c.out.Write(data)
		if status != 200 {
			return 1
		}
		return 0
	}
	var r admin.OpResult
	if err := json.Unmarshal(data, &r); err != nil || status != 200 && r.Message == "" {
		// Not an OpResult: an error from before the operation ran
		// (authentication, the request), {"error": ...}.
		return c.fail(status, data)
	}
	if r.Plan != "" {
		fmt.Fprintln(c.out, r.Plan)
	}
	for _, s := range r.Steps {
		fmt.Fprintln(c.out, "  "+s)
	}
	if status != 200 || !r.OK {
		fmt.Fprintf(c.errw, "vigil ctl: %s\n", r.Message)
		return 1
	}
	fmt.Fprintln(c.out, r.Message)
	if r.PauseMs > 0 {
		fmt.Fprintf(c.out, "write pause: %.0f ms\n", r.PauseMs)
	}
	return 0
}

// send runs a request whose answer is printed as it comes.
func (c *ctlClient) send(ctx context.Context, method, path string) int {
	status, data, err := c.do(ctx, method, path, nil)
	if err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	if status != 200 {
		return c.fail(status, data)
	}
	c.out.Write(data)
	return 0
}

func (c *ctlClient) digests(ctx context.Context, path string) int {
	var rows []struct {
		Cluster   string `json:"cluster"`
		Digest    string `json:"digest"`
		Text      string `json:"digest_text"`
		User      string `json:"user"`
		Schema    string `json:"schema"`
		Hostgroup string `json:"hostgroup"`
		Count     uint64 `json:"count"`
		Errors    uint64 `json:"errors"`
		Rows      uint64 `json:"rows"`
		TotalUs   int64  `json:"total_us"`
		AvgUs     int64  `json:"avg_us"`
		P99Us     int64  `json:"p99_us"`
		MaxUs     int64  `json:"max_us"`
	}
	if exit, done := c.fetch(ctx, path, &rows); done {
		return exit
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DIGEST\tCOUNT\tERRORS\tROWS\tTOTAL\tAVG\tP99\tMAX\tUSER\tHOSTGROUP\tTEXT")
	for _, r := range rows {
		text := r.Text
		if len(text) > 80 {
			text = text[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Digest, r.Count, r.Errors, r.Rows,
			us(r.TotalUs), us(r.AvgUs), us(r.P99Us), us(r.MaxUs), r.User, r.Hostgroup, text)
	}
	tw.Flush()
	return 0
}

func us(v int64) string { return (time.Duration(v) * time.Microsecond).String() }

func (c *ctlClient) rules(ctx context.Context) int {
	var list []struct {
		Cluster  string `json:"cluster"`
		Position int    `json:"position"`
		Name     string `json:"name"`
		Hits     uint64 `json:"hits"`
		Route    string `json:"route"`
		Mirror   string `json:"mirror"`
		Block    any    `json:"block"`
		Rewrite  string `json:"rewrite_pattern"`
		CacheTTL int64  `json:"cache_ttl_ns"`
		Timeout  int64  `json:"timeout_ns"`
	}
	if exit, done := c.fetch(ctx, "/api/v1/rules", &list); done {
		return exit
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\t#\tRULE\tHITS\tACTIONS")
	for _, r := range list {
		var acts []string
		if r.Block != nil {
			acts = append(acts, "block")
		}
		if r.Route != "" {
			acts = append(acts, "route="+r.Route)
		}
		if r.Rewrite != "" {
			acts = append(acts, "rewrite")
		}
		if r.CacheTTL > 0 {
			acts = append(acts, "cache="+time.Duration(r.CacheTTL).String())
		}
		if r.Timeout > 0 {
			acts = append(acts, "timeout="+time.Duration(r.Timeout).String())
		}
		if r.Mirror != "" {
			acts = append(acts, "mirror="+r.Mirror)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", r.Cluster, r.Position, r.Name, r.Hits, strings.Join(acts, " "))
	}
	tw.Flush()
	return 0
}

func (c *ctlClient) clusters(ctx context.Context) int {
	var list []admin.ClusterView
	if exit, done := c.fetch(ctx, "/api/v1/clusters", &list); done {
		return exit
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tTYPE\tLISTEN\tWRITER\tTERM\tSERVERS\tSESSIONS\tSTATEMENTS\tOPERATION")
	for _, cl := range list {
		w := cl.Writer
		if w == "" {
			w = "none (" + cl.WriterReason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", cl.Name, cl.Type, cl.Listen, w, cl.Term,
			strings.Join(cl.Servers, ","), cl.Sessions, cl.Queries, cl.Operation)
	}
	tw.Flush()
	return 0
}

// instances is `vigil ctl instances` (docs/ha.md).
func (c *ctlClient) instances(ctx context.Context) int {
	var st struct {
		Enabled bool `json:"enabled"`
		Lease   *struct {
			Instance  string  `json:"instance"`
			Lease     string  `json:"lease"`
			ValidFor  float64 `json:"valid_for_ns"`
			Instances []struct {
				Name    string   `json:"name"`
				Admin   string   `json:"admin"`
				Proxies []string `json:"proxies"`
			} `json:"instances"`
		} `json:"lease"`
		Clusters map[string]struct {
			Leader string `json:"leader"`
			Acting bool   `json:"acting"`
			Record *struct {
				Term   uint64   `json:"term"`
				Writer string   `json:"writer"`
				Phase  string   `json:"phase"`
				Fenced []string `json:"fenced"`
			} `json:"record"`
			Writes string               `json:"writes"`
			Views  []coord.InstanceView `json:"views"`
		} `json:"clusters"`
	}
	if exit, done := c.fetch(ctx, "/api/v1/coordination", &st); done {
		return exit
	}
	if !st.Enabled || st.Lease == nil {
		fmt.Fprintln(c.out, "coordination is off: this Vigil acts alone (docs/ha.md)")
		return 0
	}
	fmt.Fprintf(c.out, "this instance: %s, lease %s (sure for %.1fs)\n\n", st.Lease.Instance, st.Lease.Lease, st.Lease.ValidFor/1e9)
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tADMIN\tPROXIES")
	for _, in := range st.Lease.Instances {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", in.Name, in.Admin, strings.Join(in.Proxies, ","))
	}
	tw.Flush()
	fmt.Fprintln(c.out)
	tw = tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tACTING\tTERM\tWRITER\tPHASE\tFENCED\tWRITES HERE")
	for name, cl := range st.Clusters {
		term, writer, phase, fenced := "-", "-", "-", ""
		if r := cl.Record; r != nil {
			term, writer, phase, fenced = fmt.Sprint(r.Term), r.Writer, r.Phase, strings.Join(r.Fenced, ",")
		}
		acting := cl.Leader
		if cl.Acting {
			acting += " (this one)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, acting, term, writer, phase, fenced, cl.Writes)
	}
	tw.Flush()
	for _, name := range slices.Sorted(maps.Keys(st.Clusters)) {
		if vs := st.Clusters[name].Views; len(vs) > 0 {
			fmt.Fprintf(c.out, "\nwhat each instance sees of cluster %s (an automatic failover needs every one to lose the primary):\n", name)
			printViews(c.out, vs, time.Now())
		}
	}
	return 0
}

// printViews shows each instance's published view of each server.
func printViews(w io.Writer, vs []coord.InstanceView, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tSERVER\tSEES\tVIEW AGE")
	for _, v := range vs {
		for _, srv := range slices.Sorted(maps.Keys(v.Servers)) {
			sv := v.Servers[srv]
			sees := "answers"
			if !sv.OK {
				sees = "fails: " + cmp.Or(sv.Failure, "no check yet")
				if !sv.FailingSince.IsZero() {
					sees += fmt.Sprintf(" for %.1fs", now.Sub(sv.FailingSince).Seconds())
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fs\n", v.Instance, srv, sees, now.Sub(v.At).Seconds())
		}
	}
	tw.Flush()
}

// server is `vigil ctl server add|remove`.
func (c *ctlClient) server(ctx context.Context, cluster string, args []string) int {
	const usage = "vigil ctl server add NAME HOST:PORT [--weight N] [--role replica|primary] [--agent HOST:PORT [--clone [--from DONOR] [--rate BYTES/s] [--wait]]]\nvigil ctl server remove NAME"
	if len(args) < 2 {
		fmt.Fprintln(c.errw, usage)
		return 2
	}
	switch args[0] {
	case "add":
		if len(args) < 3 {
			fmt.Fprintln(c.errw, usage)
			return 2
		}
		fs := newFlags("server add", c.errw)
		weight := fs.Int("weight", 1, "read weight")
		role := fs.String("role", "", "configured role (replication clusters): replica or primary")
		agentAddr := fs.String("agent", "", "host:port of the server's vigil agent (needed by --clone)")
		clone := fs.Bool("clone", false, "then clone it from a caught-up member (see vigil ctl clone)")
		from := fs.String("from", "", "with --clone: the donor")
		rate := fs.String("rate", "", "with --clone: the stream's limit in bytes/s")
		wait := fs.Bool("wait", false, "with --clone: follow the clone until it ends")
		if err := fs.Parse(args[3:]); err != nil {
			return 2
		}
		if *clone && *agentAddr == "" {
			fmt.Fprintln(c.errw, "vigil ctl server add --clone needs --agent HOST:PORT: the clone is streamed to the server's agent")
			return 2
		}
		if rc := c.post(ctx, "/api/v1/servers", admin.ServerSpec{Cluster: cluster, Name: args[1], Address: args[2], Weight: *weight, Role: *role, Agent: *agentAddr}); rc != 0 || !*clone {
			return rc
		}
		cargs := []string{args[1]}
		if *from != "" {
			cargs = append(cargs, "--from", *from)
		}
		if *rate != "" {
			cargs = append(cargs, "--rate", *rate)
		}
		if *wait {
			cargs = append(cargs, "--wait")
		}
		// The monitor checks the new server before a clone can name it.
		for i := 0; ; i++ {
			rc := c.cloneQuiet(ctx, cluster, cargs, "clone", i < 20)
			if rc != 3 {
				return rc
			}
			select {
			case <-ctx.Done():
				return 1
			case <-time.After(500 * time.Millisecond):
			}
		}
	case "remove":
		return c.send(ctx, "DELETE", "/api/v1/servers/"+url.PathEscape(args[1])+"?"+urlQuery("cluster", cluster))
	}
	fmt.Fprintln(c.errw, usage)
	return 2
}

// sandboxToken is the admin token of a sandbox's Vigil: sandbox.json's,
// else the one Vigil generated in DIR/state/admin-token.
func sandboxToken(dir string) string {
	if data, err := os.ReadFile(filepath.Join(dir, "sandbox.json")); err == nil {
		var m struct {
			Token string `json:"admin_token"`
		}
		if json.Unmarshal(data, &m) == nil && m.Token != "" {
			return m.Token
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "state", "admin-token"))
	return strings.TrimSpace(string(data))
}

// urlQuery encodes key, value pairs as a URL query in the order given; empty
// values are sent as they were before (key=), so the server's defaults
// apply alike. Names and values are escaped: a cluster or server name
// with '&', '#', '?' or spaces reaches the API as typed.
func urlQuery(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(kv[i]))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(kv[i+1]))
	}
	return b.String()
}
