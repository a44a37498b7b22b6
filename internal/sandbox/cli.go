package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/go-sql-driver/mysql"
)

const sandboxUsage = `vigil sandbox — local MariaDB topologies of real mariadbd processes

Usage:
  vigil sandbox up --dir DIR [--topology replication|galera|standalone] [--nodes N]
                   [--clusters N] [--base-port P] [--semi-sync] [--etcd 0|1|3] [--vigils N]
                   [--agents] [--spares N] [--self-healing] [--replace-after D]
                   [--vigil-binary PATH] [--json] [--verbose]
  vigil sandbox status --dir DIR [--json]
  vigil sandbox add --dir DIR [--spare]
  vigil sandbox down --dir DIR [--purge]
  vigil sandbox start|stop|kill NAME --dir DIR
  vigil sandbox pause|resume NAME --dir DIR
  vigil sandbox isolate|heal NAME --dir DIR
  vigil sandbox isolate NAME --from PEER --dir DIR
  vigil sandbox sql NODE "STATEMENT" --dir DIR [--timeout 60s]
  vigil sandbox help

Commands:
  up       create and start a sandbox; waits until replication runs (or Galera
           is Synced), writes DIR/sandbox.json and DIR/vigil.yaml; with --etcd N
           also runs an etcd cluster of N members (etcd1..etcdN) and with
           --vigils N (needs --etcd) N Vigil daemons (vigil1..vigilN), each with
           its own DIR/vigilK/vigil.yaml; with --agents a vigil agent beside
           every node (agentK for nodeK, mutual TLS with certificates in
           DIR/agents/certs, docs/lifecycle.md); with --spares N (implies
           --agents) N spare hosts spare1..spareN: an empty read-only mariadbd
           that replicates from nobody, with an agent, listed in vigil.yaml
           under lifecycle.spares; --self-healing and --replace-after D set
           lifecycle.self_healing and lifecycle.replace_after there;
           --clusters N (2..4, replication) runs N clusters of --nodes nodes
           each (sandbox, sandbox2.. in vigil.yaml, GTID domains 0..N-1, each
           with its own proxy listener) and reserves a sharded listener
           (shards: in vigil.yaml, shards in sandbox.json)
  status   what every node is now: running, role, replication, paused, isolated;
           and every etcd member and Vigil daemon: state, pid, healthy/answering
  add      one more node (replication: a replica of the current primary,
           replicating from the start of its binary log); not added to
           vigil.yaml: add it to Vigil with vigil ctl server add or a reload;
           with --spare one more spare host and its agent (needs --agents);
           prints the lines of vigil.yaml that make Vigil use it
  down     stop the Vigil daemons, agents, nodes and etcd members (and heal,
           resume); --purge also deletes DIR
  start    start a stopped node, etcd member or Vigil daemon and wait until it
           answers
  stop     shut it down cleanly (SIGTERM; SIGKILL after 20 s)
  kill     SIGKILL it (a crash) and wait until it is gone
  pause    SIGSTOP it; resume sends SIGCONT
  isolate  drop its TCP traffic with iptables (a Vigil daemon: only its traffic
           with etcd); heal removes the rules. --from PEER drops only the
           connections between NAME (a node or Vigil daemon) and PEER (a node or
           etcd member): e.g. isolate vigil1 --from node1
  sql      run a statement as root over the node's socket; prints rows
           tab-separated without a header

--dir defaults to $VIGIL_SANDBOX_DIR. Flags may come before or after NAME.
Nodes are named node1..nodeN, spares spare1..spareN, etcd members etcd1..etcdN, Vigil daemons
vigil1..vigilN. Must run as root. See docs/sandbox.md.
`

// sandboxFlags are the flags of every sandbox command; each command
// registers the ones it takes.
type sandboxFlags struct {
	dir      string
	topology string
	nodes    int
	clusters int
	basePort int
	semiSync bool
	etcd     int
	vigils   int
	vigilBin string
	agents   bool
	spares   int
	spare    bool
	selfHeal bool
	replace  time.Duration
	json     bool
	purge    bool
	verbose  bool
	timeout  time.Duration
	from     string
}

// Command is `vigil sandbox ARGS`.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// The driver logs I/O timeouts of paused nodes itself; the errors it
	// returns say the same and are reported once.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	fail := func(err error) int {
		msg := strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
		fmt.Fprintf(stderr, "vigil sandbox: %s\n", msg)
		return 1
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, sandboxUsage)
		return 1
	}
	cmd := args[0]
	if cmd == "help" || cmd == "-h" || cmd == "--help" {
		fmt.Fprint(stdout, sandboxUsage)
		return 0
	}
	var f sandboxFlags
	fs, npos, ok := sandboxFlagSet(cmd, &f)
	if !ok {
		return fail(fmt.Errorf("unknown command %q (run: vigil sandbox help)", cmd))
	}
	pos, err := ParseInterleaved(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, sandboxUsage)
		return 0
	}
	if err != nil {
		return fail(fmt.Errorf("%s: %v (run: vigil sandbox help)", cmd, err))
	}
	if cmd == "sql" && len(pos) > 2 {
		pos = []string{pos[0], strings.Join(pos[1:], " ")}
	}
	if len(pos) != npos {
		want := map[int]string{0: "no arguments", 1: "a NODE", 2: "a NODE and a STATEMENT"}[npos]
		return fail(fmt.Errorf("%s takes %s, got %q (run: vigil sandbox help)", cmd, want, pos))
	}
	if f.dir == "" {
		f.dir = os.Getenv("VIGIL_SANDBOX_DIR")
	}
	if f.dir == "" {
		return fail(errors.New("no sandbox directory: pass --dir DIR or set VIGIL_SANDBOX_DIR"))
	}
	logger := slog.New(&sandboxLogHandler{w: stderr, level: sandboxLogLevel(f.verbose)})
	if cmd == "up" {
		if err := sandboxUp(ctx, &f, logger, stdout); err != nil {
			return fail(err)
		}
		return 0
	}
	sb, err := Load(f.dir)
	if err != nil {
		return fail(err)
	}
	sb.SetLogger(logger)
	if len(pos) > 0 {
		check := sb.CheckName
		if cmd == "sql" {
			check = func(name string) error {
				if auxName(name) && sb.CheckName(name) == nil {
					return fmt.Errorf("sql runs on nodes only, and %s is not one (nodes: %s)", name, strings.Join(sb.NodeNames(), ", "))
				}
				_, err := sb.Node(name)
				return err
			}
		}
		if err := check(pos[0]); err != nil {
			return fail(err)
		}
	}
	if err := sandboxCommand(ctx, sb, cmd, pos, &f, stdout); err != nil {
		return fail(err)
	}
	return 0
}

// sandboxFlagSet builds the flag set of a command and says how many
// positional arguments it takes.
func sandboxFlagSet(cmd string, f *sandboxFlags) (*flag.FlagSet, int, bool) {
	fs := flag.NewFlagSet("vigil sandbox "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.dir, "dir", "", "sandbox directory (default $VIGIL_SANDBOX_DIR)")
	fs.BoolVar(&f.verbose, "verbose", false, "log progress")
	npos := 1
	switch cmd {
	case "up":
		npos = 0
		fs.StringVar(&f.topology, "topology", "replication", "replication, galera or standalone")
		fs.IntVar(&f.nodes, "nodes", 0, "number of nodes (default 3; standalone 1); per cluster with --clusters")
		fs.IntVar(&f.clusters, "clusters", 1, "number of replication clusters (1..4), each of --nodes nodes")
		fs.IntVar(&f.basePort, "base-port", 0, "node K listens on base-port+K-1 (default: a free block)")
		fs.BoolVar(&f.semiSync, "semi-sync", false, "semi-synchronous replication")
		fs.IntVar(&f.etcd, "etcd", 0, "run an etcd cluster of this many members (0, 1 or 3)")
		fs.IntVar(&f.vigils, "vigils", 0, "run this many Vigil daemons (0..3; needs --etcd)")
		fs.StringVar(&f.vigilBin, "vigil-binary", "", "the vigil program the daemons and agents run (default: this one)")
		fs.BoolVar(&f.agents, "agents", false, "run a vigil agent beside every node")
		fs.IntVar(&f.spares, "spares", 0, "run this many spare hosts, each with an agent (implies --agents)")
		fs.BoolVar(&f.selfHeal, "self-healing", false, "lifecycle.self_healing: true in vigil.yaml (implies --agents)")
		fs.DurationVar(&f.replace, "replace-after", 0, "lifecycle.replace_after in vigil.yaml (default: Vigil's 5m)")
		fs.BoolVar(&f.json, "json", false, "print sandbox.json instead of a summary")
	case "status":
		npos = 0
		fs.BoolVar(&f.json, "json", false, "print JSON")
	case "add":
		npos = 0
		fs.BoolVar(&f.spare, "spare", false, "add a spare host with an agent instead of a node")
	case "down":
		npos = 0
		fs.BoolVar(&f.purge, "purge", false, "also delete the sandbox directory")
	case "sql":
		npos = 2
		fs.DurationVar(&f.timeout, "timeout", 60*time.Second, "give up after this long")
	case "isolate":
		fs.StringVar(&f.from, "from", "", "cut NAME off from this node or etcd member only")
	case "start", "stop", "kill", "pause", "resume", "heal":
	default:
		return nil, 0, false
	}
	return fs, npos, true
}

func sandboxUp(ctx context.Context, f *sandboxFlags, log *slog.Logger, stdout io.Writer) error {
	topo, err := ParseTopology(f.topology)
	if err != nil {
		return err
	}
	if f.clusters < 1 || f.clusters > MaxClusters {
		return fmt.Errorf("--clusters must be between 1 and %d, not %d", MaxClusters, f.clusters)
	}
	t0 := time.Now()
	sb, err := Up(ctx, Options{
		Dir: f.dir, Topology: topo, Nodes: f.nodes, Clusters: f.clusters, BasePort: f.basePort, SemiSync: f.semiSync,
		Etcd: f.etcd, Vigils: f.vigils, Agents: f.agents, Spares: f.spares, SelfHealing: f.selfHeal,
		ReplaceAfter: f.replace, VigilBinary: f.vigilBin, Logger: log,
	})
	if err != nil {
		return err
	}
	took := time.Since(t0)
	if f.json {
		data, err := os.ReadFile(sb.ManifestPath())
		if err != nil {
			return err
		}
		_, err = stdout.Write(data)
		return err
	}
	m := sb.Manifest()
	extra := ""
	if m.SemiSync {
		extra = ", semi-sync"
	}
	if sp := len(m.spares()); sp > 0 {
		extra += fmt.Sprintf(", %d spare(s)", sp)
	}
	fmt.Fprintf(stdout, "Sandbox up in %.1fs: %s, %d node(s)%s, in %s\n", took.Seconds(), m.Topology, len(m.members()), extra, m.Dir)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, n := range m.Nodes {
		ports := ""
		if n.GcommPort != 0 {
			ports = fmt.Sprintf("gcomm %d, ist %d, sst %d", n.GcommPort, n.ISTPort, n.SSTPort)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\tpid %d\t%s\t%s\n", n.Name, n.Role, n.Addr(), n.PID, n.Socket, ports)
	}
	_ = tw.Flush()
	if len(m.Etcd)+len(m.Vigils) > 0 {
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, e := range m.Etcd {
			fmt.Fprintf(tw, "  %s\tetcd\t%s\tpid %d\tpeer port %d\t%s\n", e.Name, e.ClientAddr(), e.PID, e.PeerPort, e.Log)
		}
		for _, v := range m.Vigils {
			fmt.Fprintf(tw, "  %s\tvigil\t%s\tpid %d\tadmin %s, etcd from %s\t%s\n", v.Name, v.Proxy.Addr(), v.PID, v.Admin.Addr(), v.SourceAddress, v.Config)
		}
		_ = tw.Flush()
	}
	if len(m.Agents) > 0 {
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, a := range m.Agents {
			of := "agent of "
			if i, err := m.node(a.Node); err == nil && m.Nodes[i].isSpare() {
				of = "agent of spare "
			}
			fmt.Fprintf(tw, "  %s\t%s%s\t%s\tpid %d\t%s\n", a.Name, of, a.Node, a.Listen.Addr(), a.PID, a.Config)
		}
		_ = tw.Flush()
		fmt.Fprintf(stdout, "Agents: mutual TLS with %s (vigil.crt, vigil.key, ca.crt): vigil agent status --addr %s --certs %s\n",
			AgentCertsDir(m.Dir), m.Agents[0].Listen.Addr(), AgentCertsDir(m.Dir))
	}
	a := m.Accounts
	fmt.Fprintf(stdout, "Accounts: %s/%s (all privileges), %s/%s (monitor), %s/%s (replication); root over the socket.\n",
		a.App.User, a.App.Password, a.Monitor.User, a.Monitor.Password, a.Repl.User, a.Repl.Password)
	fmt.Fprintf(stdout, "Reserved for Vigil: proxy %s, admin %s (token %s: vigil ctl --sandbox %s sends it).\n", m.Proxy.Addr(), m.Admin.Addr(), m.AdminToken, m.Dir)
	if err := printClusters(stdout, m.Clusters, m.Shards); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Vigil config: vigil run --config %s\n", sb.ConfigPath())
	fmt.Fprintf(stdout, "Connect:      mariadb -h %s -P %d -u %s -p%s\n", m.Nodes[0].Host, m.Nodes[0].Port, a.App.User, a.App.Password)
	fmt.Fprintf(stdout, "Tear down:    vigil sandbox down --dir %s [--purge]\n", m.Dir)
	return nil
}

func sandboxCommand(ctx context.Context, sb *Sandbox, cmd string, pos []string, f *sandboxFlags, stdout io.Writer) error {
	node := ""
	if len(pos) > 0 {
		node = pos[0]
	}
	done := func(what string) error {
		pid, err := sb.PID(node)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s (pid %d)\n", node, what, pid)
		return nil
	}
	switch cmd {
	case "status":
		return sandboxStatus(ctx, sb, f.json, stdout)
	case "add":
		if f.spare {
			return sandboxAddSpare(ctx, sb, stdout)
		}
		n, err := sb.AddNode(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s added at %s (pid %d, %s); Vigil routes to it after: vigil ctl server add %s %s\n", n.Name, n.Addr(), n.PID, n.Role, n.Name, n.Addr())
		return nil
	case "down":
		if err := sb.Down(ctx, f.purge); err != nil {
			return err
		}
		if f.purge {
			fmt.Fprintf(stdout, "sandbox in %s stopped and deleted\n", sb.Dir())
		} else {
			fmt.Fprintf(stdout, "sandbox in %s stopped (start again: vigil sandbox start NODE --dir %s; delete: --purge)\n", sb.Dir(), sb.Dir())
		}
		return nil
	case "sql":
		ctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		rows, err := sb.SQL(ctx, node, pos[1])
		if err != nil {
			return err
		}
		for _, r := range rows {
			fmt.Fprintln(stdout, strings.Join(r, "\t"))
		}
		return nil
	case "start":
		if running, err := sb.IsRunning(node); err == nil && running {
			return done("is already running")
		}
		if err := sb.Start(ctx, node); err != nil {
			return err
		}
		return done("started")
	case "stop":
		if err := sb.Stop(ctx, node); err != nil {
			return err
		}
		return done("stopped")
	case "kill":
		if err := sb.Kill(ctx, node); err != nil {
			return err
		}
		return done("killed")
	case "pause":
		if err := sb.Pause(ctx, node); err != nil {
			return err
		}
		return done("paused")
	case "resume":
		if err := sb.Resume(ctx, node); err != nil {
			return err
		}
		return done("resumed")
	case "isolate":
		if f.from != "" {
			if err := sb.Cut(ctx, node, f.from); err != nil {
				return err
			}
			return done("cut off from " + f.from)
		}
		if err := sb.Isolate(ctx, node); err != nil {
			return err
		}
		return done("isolated")
	case "heal":
		if err := sb.Heal(ctx, node); err != nil {
			return err
		}
		return done("healed")
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func sandboxAddSpare(ctx context.Context, sb *Sandbox, stdout io.Writer) error {
	n, a, err := sb.AddSpare(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s added at %s (pid %d, read_only=ON, replicating from nobody); its agent %s listens on %s (pid %d)\n",
		n.Name, n.Addr(), n.PID, a.Name, a.Listen.Addr(), a.PID)
	m := sb.Manifest()
	how, err := spareHowTo(&m, n.Name, sb.ConfigPath())
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, how)
	return nil
}

func sandboxStatus(ctx context.Context, sb *Sandbox, asJSON bool, stdout io.Writer) error {
	r, err := sb.Status(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		data, err := sandboxJSON(r)
		if err != nil {
			return err
		}
		_, err = stdout.Write(data)
		return err
	}
	fmt.Fprintf(stdout, "sandbox %s (%s)\n", r.Dir, r.Topology)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tADDRESS\tPID\tRUNNING\tREPLICATION\tFLAGS")
	for _, n := range r.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s:%d\t%d\t%s\t%s\t%s\n", n.Name, n.Role, n.Host, n.Port, n.PID,
			sbYesNo(n.Running), sandboxReplColumn(n), sandboxFlagsColumn(n))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Clusters) > 0 {
		fmt.Fprintln(stdout)
		if err := printClusters(stdout, r.Clusters, r.Shards); err != nil {
			return err
		}
	}
	if len(r.Etcd) > 0 {
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ETCD\tCLIENT\tPEER\tPID\tSTATE\tHEALTHY\tFLAGS")
		for _, e := range r.Etcd {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", e.Name, e.Client, e.PeerPort, e.PID, e.State,
				auxHealthColumn(e.State, e.Healthy), auxFlagsColumn(e.Isolated))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Vigils) > 0 {
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "VIGIL\tPROXY\tADMIN\tETCD FROM\tPID\tSTATE\tANSWERS\tFLAGS")
		for _, v := range r.Vigils {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", v.Name, v.Proxy, v.Admin, v.SourceAddress, v.PID, v.State,
				auxHealthColumn(v.State, v.Answering), auxFlagsColumn(v.Isolated))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(r.Agents) > 0 {
		fmt.Fprintln(stdout)
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "AGENT\tOF\tLISTEN\tPID\tSTATE\tANSWERS")
		for _, a := range r.Agents {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", a.Name, a.Node, a.Listen, a.PID, a.State, auxHealthColumn(a.State, a.Answering))
		}
		return tw.Flush()
	}
	return nil
}

// printClusters lists the clusters of a sandbox of several and its
// sharded listener; nothing for a single-cluster sandbox.
func printClusters(w io.Writer, clusters []Cluster, shards *Endpoint) error {
	if len(clusters) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tPROXY\tGTID DOMAIN\tNODES")
	for _, c := range clusters {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", c.Name, c.Proxy.Addr(), c.GTIDDomain, strings.Join(c.Nodes, ", "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shards != nil {
		fmt.Fprintf(w, "Sharded listener (shards: in vigil.yaml): %s\n", shards.Addr())
	}
	return nil
}

// auxHealthColumn is yes/no for a running etcd member or Vigil daemon
// (healthy, answering), "-" otherwise.
func auxHealthColumn(state string, ok bool) string {
	if state != StateRunning {
		return "-"
	}
	return sbYesNo(ok)
}

func auxFlagsColumn(isolated bool) string {
	if isolated {
		return "isolated"
	}
	return "-"
}

func sandboxReplColumn(n NodeStatus) string {
	switch {
	case n.WsrepState != "":
		return fmt.Sprintf("%s, %s, size %d", n.WsrepState, n.ClusterStatus, n.ClusterSize)
	case n.Role != RoleReplica || !n.Reachable:
		return "-"
	case !n.Replicating:
		msg := fmt.Sprintf("io=%s sql=%s", n.IOState, n.SQLState)
		if e := strings.TrimSpace(n.LastIOError + " " + n.LastSQLError); e != "" {
			if len(e) > 60 {
				e = e[:57] + "..."
			}
			msg += ": " + e
		}
		return msg
	case n.SecondsBehind == nil:
		return "running, lag unknown"
	}
	src := ""
	if n.Source != "" {
		src = " from " + n.Source
	}
	return fmt.Sprintf("running%s, %ds behind", src, *n.SecondsBehind)
}

func sandboxFlagsColumn(n NodeStatus) string {
	var f []string
	if n.Paused {
		f = append(f, "paused")
	}
	if n.Isolated {
		f = append(f, "isolated")
	}
	if n.Running && !n.Reachable && !n.Paused {
		f = append(f, "unreachable")
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ",")
}

func sandboxJSON(v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func sbYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// sandboxLogHandler prints log records as "vigil sandbox: msg key=value" lines.
type sandboxLogHandler struct {
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
}

func sandboxLogLevel(verbose bool) slog.Level {
	if verbose {
		return slog.LevelInfo
	}
	return slog.LevelWarn
}

func (h *sandboxLogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *sandboxLogHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("vigil sandbox: ")
	b.WriteString(r.Message)
	add := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *sandboxLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &sandboxLogHandler{w: h.w, level: h.level, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *sandboxLogHandler) WithGroup(string) slog.Handler { return h }
