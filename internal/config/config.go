// Package config owns Vigil's configuration file: its schema, defaults,
// strict decoding (unknown keys are errors) and validation that reports
// every problem with its key path. The runtime (internal/daemon) builds
// each package's options from a validated Config; enums a package owns
// (router.RYW, failover.SemiSyncManage) are its types, decoded and
// checked by that package when the file is read.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/vigil-db/vigil/internal/failover"
	"github.com/vigil-db/vigil/internal/router"
)

// Config is the whole file.
type Config struct {
	// StateDir holds the event journal and salvage files.
	StateDir string `yaml:"state_dir"`
	// Threads is how many threads run Vigil's Go code at once: auto (the
	// default) follows the load between one and the CPUs Vigil may use;
	// a number fixes it (docs/configuration.md).
	Threads  string    `yaml:"threads"`
	Log      Log       `yaml:"log"`
	Admin    Admin     `yaml:"admin"`
	Users    []User    `yaml:"users"`
	Clusters []Cluster `yaml:"clusters"`
	// Digests configures per-statement-shape statistics.
	Digests Digests `yaml:"digests"`
	// QueryCache bounds the result cache that rules with cache_ttl fill.
	QueryCache QueryCache `yaml:"query_cache"`
	// Security bounds unauthenticated clients and throttles failed logins.
	Security Security `yaml:"security"`
	// Coordination: several Vigil instances through etcd (docs/ha.md).
	Coordination Coordination `yaml:"coordination"`
	// Agents: how Vigil reaches the vigil agents that servers name
	// (clusters[].servers[].agent) to clone them (docs/lifecycle.md).
	Agents Agents `yaml:"agents"`
	// Shards: one listener over several clusters, routing by schema
	// (docs/shards.md).
	Shards Shards `yaml:"shards"`

	// path is the file the config was read from, for messages.
	path string
}

// Log configures Vigil's own structured logs.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text, json

	// The query log: one JSON object per statement and per login attempt,
	// written to the sinks below (none by default).
	//
	// Queries logs every statement; rules with log: true/false override it
	// per statement.
	Queries bool `yaml:"queries"`
	// Auth logs login attempts (default on when a sink is set).
	Auth *bool `yaml:"auth"`
	// Statements is masked (literals replaced, default) or full.
	Statements string `yaml:"statements"`
	// Buffer is how many entries may wait for the sinks; more are dropped
	// and counted, never waited for.
	Buffer int       `yaml:"buffer"`
	File   *LogFile  `yaml:"file"`
	Stdout bool      `yaml:"stdout"`
	Kafka  *LogKafka `yaml:"kafka"`
}

// LogFile is the query log's rotating file.
type LogFile struct {
	Path    string   `yaml:"path"`
	MaxSize Size     `yaml:"max_size"`
	MaxAge  Duration `yaml:"max_age"`
	Keep    int      `yaml:"keep"`
}

// LogKafka ships the query log to a Kafka topic.
type LogKafka struct {
	Brokers     []string `yaml:"brokers"`
	Topic       string   `yaml:"topic"`
	Compression string   `yaml:"compression"`
	ClientID    string   `yaml:"client_id"`
	MaxBuffered int      `yaml:"max_buffered"`
	Linger      Duration `yaml:"linger"`
}

// Digests configures statement statistics.
type Digests struct {
	// Enabled is true unless set to false.
	Enabled *bool `yaml:"enabled"`
	// MaxEntries bounds the (digest, user, schema, hostgroup) entries kept;
	// the least recently used are evicted first.
	MaxEntries int `yaml:"max_entries"`
}

// On reports whether digests are collected.
func (d Digests) On() bool { return d.Enabled == nil || *d.Enabled }

// QueryCache bounds the query cache.
type QueryCache struct {
	MaxSize      Size `yaml:"max_size"`
	MaxEntrySize Size `yaml:"max_entry_size"`
}

// Rule is one query rule. Rules are tried in order; a matching rule
// applies its actions and, unless continue is set, ends the search.
type Rule struct {
	Name     string       `yaml:"name"`
	Match    RuleMatch    `yaml:"match"`
	Route    string       `yaml:"route"` // writer, reader or a server group
	Rewrite  *RuleRewrite `yaml:"rewrite"`
	CacheTTL Duration     `yaml:"cache_ttl"`
	Block    *RuleBlock   `yaml:"block"`
	Timeout  Duration     `yaml:"timeout"`
	Mirror   string       `yaml:"mirror"` // a server group
	Log      *bool        `yaml:"log"`
	Continue bool         `yaml:"continue"`
}

// RuleMatch selects statements. Empty fields match anything; a value that
// starts with "!" matches what the rest does not.
type RuleMatch struct {
	User   string `yaml:"user"`
	Schema string `yaml:"schema"`
	Client string `yaml:"client"` // an address or CIDR prefix
	Digest string `yaml:"digest"` // regular expression on the normalised text
	Query  string `yaml:"query"`  // regular expression on the statement text
}

// RuleRewrite replaces matches of Pattern (RE2) by Replace ($1 for groups).
type RuleRewrite struct {
	Pattern string `yaml:"pattern"`
	Replace string `yaml:"replace"`
}

// RuleBlock refuses a statement with an error of its own.
type RuleBlock struct {
	Code     int    `yaml:"code"`
	SQLState string `yaml:"sqlstate"`
	Message  string `yaml:"message"`
}

// Admin is the management HTTP server.
type Admin struct {
	// Listen is host:port (default 127.0.0.1:6080); "off" disables the
	// admin server.
	Listen string `yaml:"listen"`
	// Token is required as "Authorization: Bearer <token>" (or as the
	// password of basic auth). When neither a token nor a user is set,
	// Vigil generates one into STATE_DIR/admin-token at its first start.
	Token string `yaml:"token"`
	// Auth is "token" (the default: a token or user is always required)
	// or "none": no credentials at all, allowed only on a loopback
	// address, with a warning at every start.
	Auth string `yaml:"auth"`
	// User and Password allow basic auth with these credentials too.
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// TLS serves the admin API over HTTPS.
	TLS *TLS `yaml:"tls"`
}

// AdminEnabled reports whether the admin server runs.
func (a Admin) AdminEnabled() bool { return a.Listen != "off" }

// User is an account clients log in with. Vigil logs in to the servers
// with the same credentials unless BackendUser/BackendPassword are set.
type User struct {
	Name string `yaml:"name"`
	// Password is the plaintext password, or a pre-hashed one: "*" followed by
	// 40 hex digits (the mysql_native_password hash, as in mysql.user).
	Password        string `yaml:"password"`
	BackendUser     string `yaml:"backend_user"`
	BackendPassword string `yaml:"backend_password"`
	DefaultSchema   string `yaml:"default_schema"`
	// ReadYourWrites is none, session, gtid (default) or global.
	ReadYourWrites router.RYW `yaml:"read_your_writes"`
	SessionWindow  Duration   `yaml:"session_window"`
	// Multiplexing off keeps each client on one server connection.
	Multiplexing *bool `yaml:"multiplexing"`
	RequireTLS   bool  `yaml:"require_tls"`
}

// Cluster is one set of servers that replicate from each other, with the
// address applications connect to.
type Cluster struct {
	Name string `yaml:"name"`
	// Type is replication, galera or read-only.
	Type   string `yaml:"type"`
	Listen string `yaml:"listen"`
	// ServerVersion is what clients see in the handshake; empty means
	// "ask the first reachable server".
	ServerVersion string `yaml:"server_version"`
	// AuthPlugin is the authentication method offered to clients first:
	// mysql_native_password (default) or caching_sha2_password.
	AuthPlugin     string   `yaml:"auth_plugin"`
	TLS            *TLS     `yaml:"tls"`
	Servers        []Server `yaml:"servers"`
	Pool           Pool     `yaml:"pool"`
	Monitor        Monitor  `yaml:"monitor"`
	Failover       Failover `yaml:"failover"`
	Routing        Routing  `yaml:"routing"`
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// ServerGroups name sets of servers that rules route or mirror to.
	ServerGroups map[string][]string `yaml:"server_groups"`
	// Rules steer, rewrite, block, cache, time out, mirror and log
	// statements; see docs/rules.md.
	Rules []Rule `yaml:"rules"`
	// Lifecycle is the self-healing policy: rebuilds and replacements
	// through the agents (docs/lifecycle.md).
	Lifecycle Lifecycle `yaml:"lifecycle"`
}

// TLS is a certificate and key pair in PEM files.
type TLS struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Server is one MariaDB or MySQL server.
type Server struct {
	Name    string `yaml:"name"`
	Address string `yaml:"address"`
	// Role is the initial role: primary or replica (replication), or empty.
	Role   string `yaml:"role"`
	Weight int    `yaml:"weight"`
	// Standby: replicating and monitored, never routed, and promoted only
	// when an operator names it (switchover/failover --to). Ignored while
	// the server is the writer.
	Standby bool `yaml:"standby"`
	// TLS to this server.
	TLS bool `yaml:"tls"`
	// Datadir, when the server runs on this host, lets Vigil read the binary
	// logs of a dead primary to salvage transactions.
	Datadir string `yaml:"datadir"`
	// Agent is host:port of the vigil agent on the server's host; clone
	// needs it on the donor and the target (docs/lifecycle.md).
	Agent string `yaml:"agent"`
}

// Pool sizes the per-server connection pools.
type Pool struct {
	MinIdle      int      `yaml:"min_idle"`
	MaxOpen      int      `yaml:"max_open"`
	IdleTimeout  Duration `yaml:"idle_timeout"`
	MaxLifetime  Duration `yaml:"max_lifetime"`
	ValidateIdle Duration `yaml:"validate_idle"`
}

// Monitor configures health checks.
type Monitor struct {
	User              string   `yaml:"user"`
	Password          string   `yaml:"password"`
	Interval          Duration `yaml:"interval"`
	Timeout           Duration `yaml:"timeout"`
	FailAfter         int      `yaml:"fail_after"`
	RecoverAfter      int      `yaml:"recover_after"`
	MaxReplicationLag Duration `yaml:"max_replication_lag"`
	// LoneWriterGrace: how long the routed writer stays routed while its
	// checks time out and no other server could take over, if it showed
	// no sign of life (docs/monitoring.md); negative turns the rule off.
	LoneWriterGrace Duration `yaml:"lone_writer_grace"`
}

// Failover configures automatic failover and switchover.
type Failover struct {
	Auto bool `yaml:"auto"`
	// AutoRejoin (default on): a primary replaced by a failover that
	// answers again with a compatible GTID history is made a replica of
	// the new primary without an operator, by the plan `vigil ctl rejoin`
	// runs. A diverged one stays fenced either way. Replication clusters
	// only.
	AutoRejoin  *bool    `yaml:"auto_rejoin"`
	DetectAfter Duration `yaml:"detect_after"`
	// DetectAfterRefused: the shorter bound when the primary refuses
	// connections and every replica's IO thread lost it (a dead process);
	// negative turns it off.
	DetectAfterRefused Duration `yaml:"detect_after_refused"`
	// DetectAfterSilent: the shorter bound when the primary's checks time
	// out and every replica has received nothing from it (no event, no
	// heartbeat) for as long; negative turns it off.
	DetectAfterSilent Duration `yaml:"detect_after_silent"`
	MinInterval       Duration `yaml:"min_interval"`
	ApplyTimeout      Duration `yaml:"apply_timeout"`
	Candidates        []string `yaml:"candidates"`
	NeverPromote      []string `yaml:"never_promote"`
	ReplUser          string   `yaml:"repl_user"`
	ReplPassword      string   `yaml:"repl_password"`
	// Hooks run with /bin/sh -c and get VIGIL_CLUSTER, VIGIL_OLD_PRIMARY,
	// VIGIL_NEW_PRIMARY (and _ADDR) in the environment. A non-zero exit
	// of pre_failover or fence_command aborts the failover.
	PreFailover    string `yaml:"pre_failover"`
	PostFailover   string `yaml:"post_failover"`
	PostSwitchover string `yaml:"post_switchover"`
	FenceCommand   string `yaml:"fence_command"`
	// Switchover bounds: how long new statements are held, how long open
	// transactions on the old primary may take, the longest query a
	// candidate may be running.
	HoldTimeout       Duration `yaml:"hold_timeout"`
	DrainTimeout      Duration `yaml:"drain_timeout"`
	MaxRunningSeconds float64  `yaml:"max_running_seconds"`
	// SemiSync is the semi-synchronous replication policy Vigil applies
	// to a server whose role a failover, switchover or rejoin changes.
	SemiSync SemiSync `yaml:"semi_sync"`
}

// AutoRejoinOn says whether automatic rejoin is on: unless set off, for
// replication clusters.
func (f Failover) AutoRejoinOn() bool { return f.AutoRejoin == nil || *f.AutoRejoin }

// SemiSync configures how semi-sync settings follow the roles.
type SemiSync struct {
	// Manage is auto (default: when the cluster runs semi-sync), on or off.
	Manage failover.SemiSyncManage `yaml:"manage"`
	// AsyncWithoutReplica: the primary's rpl_semi_sync_master_wait_no_slave
	// OFF (commit at once when no semi-sync replica is connected). Default
	// false: it waits for the timeout.
	AsyncWithoutReplica bool `yaml:"async_without_replica"`
	// Timeout is rpl_semi_sync_master_timeout on a new primary; 0: the old
	// primary's own value.
	Timeout Duration `yaml:"timeout"`
}

// Routing configures the default read/write split.
type Routing struct {
	// ReadsOnPrimary lets the primary serve reads too when true.
	ReadsOnPrimary bool `yaml:"reads_on_primary"`
	// GTIDWaitTimeout bounds the read-your-writes wait on a replica.
	GTIDWaitTimeout Duration `yaml:"gtid_wait_timeout"`
}

// Size is a number of bytes, written as 1048576, "64KiB", "100MiB", "1GiB"
// (KB/MB/GB are read as the same powers of 1024).
type Size int64

// UnmarshalYAML parses a size.
func (z *Size) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := ParseSize(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*z = Size(v)
	return nil
}

// MarshalYAML writes the size in the largest unit that divides it:
// "64MiB", "1GiB", or a plain number of bytes.
func (z Size) MarshalYAML() (any, error) {
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if z != 0 && int64(z)%u.m == 0 {
			return strconv.FormatInt(int64(z)/u.m, 10) + u.suffix, nil
		}
	}
	return int64(z), nil
}

// ParseSize parses "100MiB" and friends.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (use e.g. 65536, 64KiB, 100MiB, 1GiB)", s)
	}
	return v * mult, nil
}

// Duration is a time.Duration written as "500ms", "2s", "1h".
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration string or a plain number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	if v, err := time.ParseDuration(s); err == nil {
		d.Duration = v
		return nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		d.Duration = time.Duration(secs * float64(time.Second))
		return nil
	}
	return fmt.Errorf("line %d: %q is not a duration (use e.g. 500ms, 2s, 1h)", n.Line, s)
}

// MarshalYAML writes the duration as a Go duration string without zero
// units at its end: "1h", "5m", "1h30m", "500ms".
func (d Duration) MarshalYAML() (any, error) {
	s := d.Duration.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s, nil
}

// Load reads, decodes strictly, applies defaults and validates a file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	c.path = path
	return c, nil
}

// Path is the file the config was loaded from.
func (c *Config) Path() string { return c.path }

// Parse decodes strictly, applies defaults and validates.
func Parse(data []byte) (*Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, errors.New(friendlyYAMLError(err))
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Marshal writes the config as YAML.
func (c *Config) Marshal() ([]byte, error) { return yaml.Marshal(c) }

// MaxThreads bounds a fixed threads setting.
const MaxThreads = 1024

// ThreadCount is the threads setting: 0 for auto, else the fixed count.
func (c *Config) ThreadCount() (int, error) {
	if c.Threads == "" || c.Threads == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(c.Threads)
	if err != nil || n < 1 || n > MaxThreads {
		return 0, fmt.Errorf("must be auto or a number of threads from 1 to %d, not %q", MaxThreads, c.Threads)
	}
	return n, nil
}

func (c *Config) applyDefaults() {
	c.Security.applyDefaults()
	c.Coordination.applyDefaults()
	c.shardDefaults()
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.StateDir == "" {
		c.StateDir = "/var/lib/vigil"
	}
	if c.Threads == "" {
		c.Threads = "auto"
	}
	if c.Admin.Listen == "" {
		c.Admin.Listen = "127.0.0.1:6080"
	}
	if c.Log.Statements == "" {
		c.Log.Statements = "masked"
	}
	if c.Log.Buffer == 0 {
		c.Log.Buffer = 65536
	}
	if k := c.Log.Kafka; k != nil {
		if k.Topic == "" {
			k.Topic = "vigil-queries"
		}
		if k.Compression == "" {
			k.Compression = "lz4"
		}
	}
	if c.Digests.MaxEntries == 0 {
		c.Digests.MaxEntries = 10000
	}
	if c.QueryCache.MaxSize == 0 {
		c.QueryCache.MaxSize = 64 << 20
	}
	if c.QueryCache.MaxEntrySize == 0 {
		c.QueryCache.MaxEntrySize = 1 << 20
	}
	for i := range c.Users {
		u := &c.Users[i]
		if u.SessionWindow.Duration == 0 {
			u.SessionWindow.Duration = 2 * time.Second
		}
	}
	for i := range c.Clusters {
		cl := &c.Clusters[i]
		if cl.Type == "" {
			cl.Type = "replication"
		}
		if cl.AuthPlugin == "" {
			cl.AuthPlugin = "mysql_native_password"
		}
		for j := range cl.Servers {
			if cl.Servers[j].Weight == 0 {
				cl.Servers[j].Weight = 1
			}
		}
		setDur(&cl.ConnectTimeout, 5*time.Second)
		setDur(&cl.Lifecycle.ReplaceAfter, 5*time.Minute)
		p := &cl.Pool
		if p.MaxOpen == 0 {
			p.MaxOpen = 100
		}
		setDur(&p.IdleTimeout, 5*time.Minute)
		setDur(&p.MaxLifetime, time.Hour)
		setDur(&p.ValidateIdle, 10*time.Second)
		m := &cl.Monitor
		setDur(&m.Interval, 500*time.Millisecond)
		setDur(&m.Timeout, 500*time.Millisecond)
		if m.FailAfter == 0 {
			m.FailAfter = 2
		}
		if m.RecoverAfter == 0 {
			m.RecoverAfter = 5
		}
		setDur(&m.MaxReplicationLag, 30*time.Second)
		setDur(&m.LoneWriterGrace, 5*time.Second)
		f := &cl.Failover
		setDur(&f.DetectAfter, 2*time.Second)
		setDur(&f.DetectAfterRefused, 100*time.Millisecond)
		setDur(&f.DetectAfterSilent, time.Second)
		setDur(&f.MinInterval, time.Hour)
		setDur(&f.ApplyTimeout, 30*time.Second)
		setDur(&f.HoldTimeout, 10*time.Second)
		setDur(&f.DrainTimeout, 5*time.Second)
		if f.MaxRunningSeconds == 0 {
			f.MaxRunningSeconds = 60
		}
		setDur(&cl.Routing.GTIDWaitTimeout, time.Second)
		for j := range cl.Rules {
			r := &cl.Rules[j]
			if r.Name == "" {
				r.Name = fmt.Sprintf("rule-%d", j+1)
			}
			if b := r.Block; b != nil {
				if b.Code == 0 {
					b.Code = 7007
				}
				if b.SQLState == "" {
					b.SQLState = "42000"
				}
				if b.Message == "" {
					b.Message = "Vigil: statement blocked by rule " + r.Name
				}
			}
		}
	}
}

// HasQueryLog reports whether any query log sink is configured.
func (l Log) HasQueryLog() bool { return l.File != nil || l.Stdout || l.Kafka != nil }

// LogsAuth reports whether login attempts are logged.
func (l Log) LogsAuth() bool { return l.HasQueryLog() && (l.Auth == nil || *l.Auth) }

func setDur(d *Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}

// Problem is one validation failure, named by its key path.
type Problem struct {
	Key    string
	Reason string
}

func (p Problem) Error() string { return p.Key + ": " + p.Reason }

// Problems is every validation failure of one file.
type Problems []Problem

func (ps Problems) Error() string {
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Validate returns every problem of the config at once, or nil.
func (c *Config) Validate() error {
	var ps Problems
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Reason: fmt.Sprintf(format, args...)})
	}
	if !oneOf(c.Log.Level, "debug", "info", "warn", "error") {
		add("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if !oneOf(c.Log.Format, "text", "json") {
		add("log.format", "must be text or json, not %q", c.Log.Format)
	}
	if _, err := c.ThreadCount(); err != nil {
		add("threads", "%v", err)
	}
	c.validateLog(add)
	c.Security.validate(add)
	c.Coordination.validate(add)
	c.validateAgents(add)
	c.validateLifecycle(add)
	c.validateShards(add)
	if c.Digests.MaxEntries < 1 {
		add("digests.max_entries", "must be at least 1")
	}
	if c.QueryCache.MaxEntrySize > c.QueryCache.MaxSize {
		add("query_cache.max_entry_size", "must not exceed query_cache.max_size")
	}
	if c.Admin.AdminEnabled() {
		host, _, err := net.SplitHostPort(c.Admin.Listen)
		if err != nil {
			add("admin.listen", "%q is not host:port (or off)", c.Admin.Listen)
		}
		switch c.Admin.Auth {
		case "", "token":
		case "none":
			if ip := net.ParseIP(host); err == nil && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				add("admin.auth", "none is allowed only when admin.listen is a loopback address, not %s", host)
			}
			if c.Admin.Token != "" || c.Admin.User != "" {
				add("admin.auth", "none, but a token or user is set: remove one or the other")
			}
		default:
			add("admin.auth", "must be token or none, not %q", c.Admin.Auth)
		}
	}
	if (c.Admin.User == "") != (c.Admin.Password == "") {
		add("admin.user", "user and password go together")
	}
	if t := c.Admin.TLS; t != nil && (t.Cert == "" || t.Key == "") {
		add("admin.tls", "needs both cert and key")
	}
	if len(c.Users) == 0 {
		add("users", "at least one user is needed: clients log in with it")
	}
	seenUser := map[string]bool{}
	for i, u := range c.Users {
		key := fmt.Sprintf("users[%d]", i)
		if u.Name == "" {
			add(key+".name", "is empty")
		}
		if seenUser[u.Name] {
			add(key+".name", "user %q is listed twice", u.Name)
		}
		seenUser[u.Name] = true
		if strings.HasPrefix(u.Password, "*") && !isNativeHash(u.Password) {
			add(key+".password", "starts with * but is not a mysql_native_password hash (* and 40 hex digits)")
		}
		if isNativeHash(u.Password) && u.BackendPassword == "" {
			add(key+".backend_password", "is needed when password is a hash: Vigil must log in to the servers")
		}
	}
	if len(c.Clusters) == 0 {
		add("clusters", "at least one cluster is needed")
	}
	seenListen := map[string]string{}
	for i, cl := range c.Clusters {
		key := fmt.Sprintf("clusters[%d]", i)
		if cl.Name == "" {
			add(key+".name", "is empty")
		}
		if !oneOf(cl.Type, "replication", "galera", "read-only") {
			add(key+".type", "must be replication, galera or read-only, not %q", cl.Type)
		}
		if _, _, err := net.SplitHostPort(cl.Listen); err != nil {
			add(key+".listen", "%q is not host:port", cl.Listen)
		} else if other, dup := seenListen[cl.Listen]; dup {
			add(key+".listen", "%s is also the listen address of cluster %q", cl.Listen, other)
		}
		seenListen[cl.Listen] = cl.Name
		if !oneOf(cl.AuthPlugin, "mysql_native_password", "caching_sha2_password") {
			add(key+".auth_plugin", "must be mysql_native_password or caching_sha2_password, not %q", cl.AuthPlugin)
		}
		if cl.TLS != nil && (cl.TLS.Cert == "" || cl.TLS.Key == "") {
			add(key+".tls", "needs both cert and key")
		}
		if len(cl.Servers) == 0 {
			add(key+".servers", "at least one server is needed")
		}
		names := map[string]bool{}
		primaries := 0
		for j, s := range cl.Servers {
			skey := fmt.Sprintf("%s.servers[%d]", key, j)
			if s.Name == "" {
				add(skey+".name", "is empty")
			}
			if names[s.Name] {
				add(skey+".name", "server %q is listed twice", s.Name)
			}
			names[s.Name] = true
			if _, _, err := net.SplitHostPort(s.Address); err != nil {
				add(skey+".address", "%q is not host:port", s.Address)
			}
			if !oneOf(s.Role, "", "primary", "replica") {
				add(skey+".role", "must be primary or replica, not %q", s.Role)
			}
			if s.Role == "primary" {
				primaries++
				if s.Standby {
					add(skey+".standby", "the configured primary cannot be a standby")
				}
			}
			if s.Weight < 0 {
				add(skey+".weight", "must not be negative")
			}
		}
		if cl.Type == "replication" && primaries > 1 {
			add(key+".servers", "%d servers have role primary; a replication cluster has one", primaries)
		}
		for _, n := range append(append([]string{}, cl.Failover.Candidates...), cl.Failover.NeverPromote...) {
			if !names[n] {
				add(key+".failover", "names server %q, which is not in servers", n)
			}
		}
		for _, d := range []struct {
			name string
			v    Duration
		}{{"detect_after", cl.Failover.DetectAfter}, {"apply_timeout", cl.Failover.ApplyTimeout},
			{"hold_timeout", cl.Failover.HoldTimeout}, {"drain_timeout", cl.Failover.DrainTimeout}} {
			if d.v.Duration < 0 {
				add(key+".failover."+d.name, "must not be negative (%s)", d.v.Duration)
			}
		}
		if cl.Failover.AutoRejoin != nil && *cl.Failover.AutoRejoin && cl.Type != "" && cl.Type != "replication" {
			add(key+".failover.auto_rejoin", "applies to replication clusters only (a %s cluster has no rejoin): remove it", cl.Type)
		}
		if cl.Failover.MaxRunningSeconds < 0 {
			add(key+".failover.max_running_seconds", "must not be negative")
		}
		for _, n := range cl.Failover.Candidates {
			if slices.Contains(cl.Failover.NeverPromote, n) {
				add(key+".failover.candidates", "%q is also in never_promote: a server is either preferred or never promoted", n)
			}
		}
		if cl.Failover.SemiSync.Timeout.Duration < 0 {
			add(key+".failover.semi_sync.timeout", "must not be negative")
		}
		if cl.Pool.MinIdle < 0 || cl.Pool.MinIdle > cl.Pool.MaxOpen {
			add(key+".pool.min_idle", "must be between 0 and pool.max_open (%d)", cl.Pool.MaxOpen)
		}
		if cl.Monitor.FailAfter < 1 {
			add(key+".monitor.fail_after", "must be at least 1")
		}
		for g, members := range cl.ServerGroups {
			if g == "writer" || g == "reader" || g == "" {
				add(key+".server_groups", "%q is reserved; name the group otherwise", g)
			}
			if len(members) == 0 {
				add(key+".server_groups."+g, "is empty")
			}
			for _, m := range members {
				if !names[m] {
					add(key+".server_groups."+g, "names server %q, which is not in servers", m)
				}
			}
		}
		validateRules(key, cl, add)
	}
	if len(ps) == 0 {
		return nil
	}
	return ps
}

func oneOf(s string, opts ...string) bool {
	for _, o := range opts {
		if s == o {
			return true
		}
	}
	return false
}

func isNativeHash(s string) bool {
	if len(s) != 41 || s[0] != '*' {
		return false
	}
	for _, c := range s[1:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// ErrNoFile is returned by Find when no config path was given or found.
var ErrNoFile = errors.New("no config file: pass --config FILE")

var unknownField = regexp.MustCompile(`field (\S+) not found in type config\.(\w+)`)

// friendlyYAMLError rewrites the decoder's messages in the words of the
// file: "line 5: field bogus not found in type config.Cluster" becomes
// "line 5: unknown key \"bogus\" in a cluster".
func friendlyYAMLError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = unknownField.ReplaceAllStringFunc(msg, func(m string) string {
		sub := unknownField.FindStringSubmatch(m)
		return fmt.Sprintf("unknown key %q in %s (check the spelling; docs list every key)", sub[1], sectionName(sub[2]))
	})
	lines := strings.Split(msg, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

func sectionName(typ string) string {
	switch typ {
	case "Config":
		return "the top level"
	case "Cluster":
		return "a cluster"
	case "Server":
		return "a server"
	case "User":
		return "a user"
	case "Rule":
		return "a rule"
	case "RuleMatch":
		return "a rule's match"
	case "Log", "LogFile", "LogKafka":
		return "the log section"
	}
	return strings.ToLower(typ)
}

func (c *Config) validateLog(add func(key, format string, args ...any)) {
	l := c.Log
	if !oneOf(l.Statements, "masked", "full") {
		add("log.statements", "must be masked or full, not %q", l.Statements)
	}
	if l.Buffer < 1 {
		add("log.buffer", "must be at least 1")
	}
	if f := l.File; f != nil {
		if f.Path == "" {
			add("log.file.path", "is empty")
		}
		if f.Keep < 0 {
			add("log.file.keep", "must not be negative")
		}
	}
	if k := l.Kafka; k != nil {
		if len(k.Brokers) == 0 {
			add("log.kafka.brokers", "at least one broker (host:port) is needed")
		}
		for i, b := range k.Brokers {
			if _, _, err := net.SplitHostPort(b); err != nil {
				add(fmt.Sprintf("log.kafka.brokers[%d]", i), "%q is not host:port", b)
			}
		}
		if !oneOf(k.Compression, "none", "gzip", "snappy", "lz4", "zstd") {
			add("log.kafka.compression", "must be none, gzip, snappy, lz4 or zstd, not %q", k.Compression)
		}
	}
}

func validateRules(key string, cl Cluster, add func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, r := range cl.Rules {
		rkey := fmt.Sprintf("%s.rules[%d]", key, i)
		if seen[r.Name] {
			add(rkey+".name", "rule %q is listed twice", r.Name)
		}
		seen[r.Name] = true
		for _, re := range []struct{ k, v string }{{"match.digest", r.Match.Digest}, {"match.query", r.Match.Query}} {
			if _, err := regexp.Compile(strings.TrimPrefix(re.v, "!")); err != nil {
				add(rkey+"."+re.k, "bad regular expression: %v", err)
			}
		}
		if cli := strings.TrimPrefix(r.Match.Client, "!"); cli != "" {
			if _, err := netip.ParsePrefix(cli); err != nil {
				if _, err := netip.ParseAddr(cli); err != nil {
					add(rkey+".match.client", "%q is neither an address nor a CIDR prefix", cli)
				}
			}
		}
		group := func(k, g string, roles bool) {
			if g == "" || (roles && (g == "writer" || g == "reader")) {
				return
			}
			if _, ok := cl.ServerGroups[g]; !ok {
				add(rkey+"."+k, "%q is not writer, reader or a group in server_groups", g)
			}
		}
		group("route", r.Route, true)
		group("mirror", r.Mirror, false)
		if r.Mirror == "writer" || r.Mirror == "reader" {
			add(rkey+".mirror", "must name a group in server_groups, not a role")
		}
		if rw := r.Rewrite; rw != nil {
			if rw.Pattern == "" {
				add(rkey+".rewrite.pattern", "is empty")
			} else if _, err := regexp.Compile(rw.Pattern); err != nil {
				add(rkey+".rewrite.pattern", "bad regular expression: %v", err)
			}
		}
		if b := r.Block; b != nil {
			if b.Code < 1 || b.Code > 65535 {
				add(rkey+".block.code", "must be between 1 and 65535")
			}
			if len(b.SQLState) != 5 {
				add(rkey+".block.sqlstate", "must be 5 characters, e.g. 42000")
			}
		}
		if r.CacheTTL.Duration < 0 || r.Timeout.Duration < 0 {
			add(rkey, "cache_ttl and timeout must not be negative")
		}
	}
}
