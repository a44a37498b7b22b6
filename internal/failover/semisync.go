package failover

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/flavor"
	"github.com/vigil-db/vigil/internal/topology"
)

// Semi-synchronous replication follows the primary role. A primary that
// acknowledges commits no replica has received can lose them in the next
// failover, so the engine writes the role settings into every plan that
// changes a server's role: the new primary gets the cluster's policy
// (rpl_semi_sync_master_enabled, _wait_no_slave, _timeout), every server
// made a replica gets the replica side (master off, slave on). The
// settings are explicit in the plan's steps: what the dry run shows is
// what runs.

// SemiSyncManage is how the engine manages semi-sync settings
// (failover.semi_sync.manage); the empty value is auto.
type SemiSyncManage string

// Semi-sync management modes (SemiSyncPolicy.Manage).
const (
	// SemiSyncAuto: manage the settings when the cluster runs semi-sync
	// (a server has it enabled when the plan is made).
	SemiSyncAuto SemiSyncManage = "auto"
	// SemiSyncOn: always set semi-sync on the new primary and replicas.
	SemiSyncOn SemiSyncManage = "on"
	// SemiSyncOff: never touch the semi-sync settings.
	SemiSyncOff SemiSyncManage = "off"
)

// UnmarshalText reads a configured mode: typed when the file is decoded,
// an unknown name is an error there.
func (m *SemiSyncManage) UnmarshalText(b []byte) error {
	switch v := SemiSyncManage(b); v {
	case "", SemiSyncAuto, SemiSyncOn, SemiSyncOff:
		*m = v
		return nil
	}
	return fmt.Errorf("semi_sync.manage must be auto, on or off, not %q", b)
}

// DefaultSemiSyncTimeout is MariaDB's default rpl_semi_sync_master_timeout,
// used when neither the policy nor the old primary gives one.
const DefaultSemiSyncTimeout = 10 * time.Second

// SemiSyncPolicy is the cluster's semi-synchronous replication policy.
type SemiSyncPolicy struct {
	// Manage is auto (the zero value), on or off.
	Manage SemiSyncManage
	// AsyncWithoutReplica turns rpl_semi_sync_master_wait_no_slave off on
	// the primary: with no semi-sync replica connected, commits do not
	// wait for the timeout. The default (false) waits: a primary never
	// acknowledges at once what no replica has.
	AsyncWithoutReplica bool
	// Timeout is rpl_semi_sync_master_timeout: how long a commit waits for
	// an acknowledgement before the primary falls back to asynchronous
	// replication. Zero: the old primary's own setting when it is known,
	// else 10s.
	Timeout time.Duration
}

// SemiSyncSettings are a server's semi-sync variables as the executor read
// them (ServerFacts.SemiSync).
type SemiSyncSettings struct {
	// Known: the server has the variables (MariaDB 10.3+, or MySQL with
	// the plugin loaded).
	Known bool
	// SourceName and ReplicaName prefix the variables:
	// rpl_semi_sync_master/_slave (MariaDB, MySQL's old plugins) or
	// rpl_semi_sync_source/_replica (MySQL's new plugins). Empty means
	// the MariaDB names.
	SourceName, ReplicaName string
	SourceEnabled           bool
	ReplicaEnabled          bool
	WaitNoReplica           bool
	Timeout                 time.Duration
}

// Setting is one global variable a step sets.
type Setting struct {
	Name, Value string
}

// stopIOSettings: what a MariaDB semi-sync replica gets before its IO
// thread is stopped in a failover. Stopping it opens a connection to the
// source to kill the dump thread there and waits for it up to
// rpl_semi_sync_slave_kill_conn_timeout (5 s by default; 2 s measured on
// a paused or cut-off source, 1 s with 1; 0 is no bound at all). The
// variable is read when the thread ends, and is harmless between
// failovers (a live source answers the kill at once).
func stopIOSettings(f flavor.Flavor, o *topology.Observation) []Setting {
	if f.KillConnTimeoutVar() == "" || o == nil || !o.SemiSync.ReplicaOn {
		return nil
	}
	return []Setting{{Name: f.KillConnTimeoutVar(), Value: "1"}}
}

// SQL is the statement that applies it.
func (s Setting) SQL() string { return "SET GLOBAL " + s.Name + " = " + s.Value }

func settingsSQL(ss []Setting) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = s.SQL()
	}
	return sqlText(parts)
}

// semiSyncInUse reports whether plans set semi-sync role settings.
func (v *view) semiSyncInUse() bool {
	switch v.opts.SemiSync.Manage {
	case SemiSyncOn:
		return true
	case SemiSyncOff:
		return false
	}
	for i := range v.snap.Servers {
		if f, ok := v.facts(i); ok && f.SemiSync.Known && (f.SemiSync.SourceEnabled && i == v.primary || f.SemiSync.ReplicaEnabled) {
			return true
		}
	}
	return false
}

func (v *view) semiSyncNames(i int) (source, replica string) {
	source, replica = flavor.OfObservation(v.obs(i)).SemiSyncNames()
	if f, ok := v.facts(i); ok && f.SemiSync.SourceName != "" {
		source, replica = f.SemiSync.SourceName, f.SemiSync.ReplicaName
	}
	return source, replica
}

// semiSyncPrimaryStep gives server i the primary's semi-sync settings;
// ok is false when semi-sync is not managed.
func (v *view) semiSyncPrimaryStep(i int) (Step, bool) {
	if !v.semiSyncInUse() {
		return Step{}, false
	}
	src, _ := v.semiSyncNames(i)
	timeout := v.opts.SemiSync.Timeout
	from := "semi_sync.timeout"
	if timeout <= 0 && v.primary >= 0 {
		if f, ok := v.facts(v.primary); ok && f.SemiSync.Known && f.SemiSync.Timeout > 0 {
			timeout, from = f.SemiSync.Timeout, v.name(v.primary)+"'s own setting"
		}
	}
	if timeout <= 0 {
		timeout, from = DefaultSemiSyncTimeout, "the default"
	}
	wait := "ON"
	if v.opts.SemiSync.AsyncWithoutReplica {
		wait = "OFF"
	}
	ss := []Setting{
		{src + "_enabled", "ON"},
		{src + "_wait_no_slave", wait},
		{src + "_timeout", strconv.FormatInt(timeout.Milliseconds(), 10)},
	}
	if strings.HasSuffix(src, "source") {
		ss[1].Name = src + "_wait_no_replica" // MySQL's new plugin
	}
	return Step{Kind: SetSemiSync, Server: v.name(i), Settings: ss,
		Detail: fmt.Sprintf("%s: semi-sync follows the primary role (timeout from %s; %s=%s: it never acknowledges at once what no replica has)", settingsSQL(ss), from, strings.TrimPrefix(ss[1].Name, src+"_"), wait)}, true
}

// semiSyncReplicaStep gives server i the replica's semi-sync settings.
func (v *view) semiSyncReplicaStep(i int) (Step, bool) {
	if !v.semiSyncInUse() {
		return Step{}, false
	}
	src, rep := v.semiSyncNames(i)
	ss := []Setting{{src + "_enabled", "OFF"}, {rep + "_enabled", "ON"}}
	return Step{Kind: SetSemiSync, Server: v.name(i), Settings: ss,
		Detail: settingsSQL(ss) + ": a replica acknowledges its source's commits and waits for none of its own (takes effect when its IO thread starts)"}, true
}

// CommitsWait reports whether a server with these settings makes every
// commit wait for a semi-sync acknowledgement even when no replica is
// connected: the source side on with wait_no_slave (wait_no_replica).
// On a replica that includes its applier's commits, so its replication
// stalls for rpl_semi_sync_master_timeout per transaction (seen: a
// rebuilt former primary that was made a replica by hand kept its
// primary settings, and a failover then waited 30 s for it in vain).
func (s SemiSyncSettings) CommitsWait() bool { return s.Known && s.SourceEnabled && s.WaitNoReplica }

// semiSyncRoleDiffers reports whether replica i has other semi-sync
// settings than a managed replica's: the source side on, or the replica
// side off.
func (v *view) semiSyncRoleDiffers(i int) bool {
	f, ok := v.facts(i)
	if !ok || !f.SemiSync.Known {
		return false
	}
	_, managed := v.semiSyncReplicaStep(i)
	return managed && (f.SemiSync.SourceEnabled || !f.SemiSync.ReplicaEnabled)
}

// unstallStep turns the source side of semi-sync off on replica i, the
// chosen candidate, when its own commits wait for acknowledgements
// (CommitsWait): its applier then applies the relay log the failover
// waits for. The primary's settings follow in the plan. ok is false when
// i's commits do not wait, or semi-sync is not managed.
func (v *view) unstallStep(i int) (Step, bool) {
	f, ok := v.facts(i)
	if !ok || !f.SemiSync.CommitsWait() || !v.semiSyncInUse() {
		return Step{}, false
	}
	src, _ := v.semiSyncNames(i)
	ss := []Setting{{src + "_enabled", "OFF"}}
	return Step{Kind: SetSemiSync, Server: v.name(i), Settings: ss,
		Detail: settingsSQL(ss) + ": its own commits, its applier's too, wait for semi-sync acknowledgements no replica sends (wait_no_slave=ON), so it would not apply its relay log; the primary's settings follow below"}, true
}

// ReplicaRoleSettings are the settings that give server (a replica of the
// current primary) its role settings back after a restart: read_only and,
// when managed, the replica side of semi-sync. ok is false when it needs
// none. The executor runs it when the monitor sees a replica come back
// with other settings (a restart with its own my.cnf).
func ReplicaRoleSettings(in Input, server string, o *topology.Observation) ([]Setting, bool) {
	v, bad := newView(in)
	if bad != "" {
		return nil, false
	}
	i := v.snap.Index(server)
	if i < 0 || i == v.primary || o == nil || !o.OK {
		return nil, false
	}
	var ss []Setting
	if f, ok := v.facts(i); ok && f.SemiSync.Known {
		if st, ok := v.semiSyncReplicaStep(i); ok && v.semiSyncRoleDiffers(i) {
			ss = append(ss, st.Settings...)
		}
	}
	// read_only last: SET GLOBAL read_only waits for commits in progress,
	// and a replica with semi-sync master on (and wait_no_slave) has its
	// applier's commits waiting for acknowledgements no one sends until
	// the master side is off.
	if !o.ReadOnly {
		ss = append(ss, Setting{"read_only", "ON"})
	}
	return ss, len(ss) > 0
}

// PrimaryRoleSettings are the settings server, the cluster's primary
// that restarted, lacks: the policy's semi-sync primary settings, and
// read_only=OFF when its my.cnf turned it on (no failover replaced it, so
// it keeps its writes) — but only when no replica holds a transaction it
// lacks (a crash can lose its last transactions with a lax
// sync_binlog/innodb_flush_log_at_trx_commit): then held says why it
// stays read-only.
func PrimaryRoleSettings(in Input, server string, o *topology.Observation) (out []Setting, held string) {
	v, bad := newView(in)
	if bad != "" {
		return nil, ""
	}
	i := v.snap.Index(server)
	if i < 0 || i != v.primary || o == nil || !o.OK || v.fenced(i) {
		return nil, ""
	}
	if o.ReadOnly {
		pp := appliedPos(o)
		for j := range v.snap.Servers {
			if j == i || !v.ok(j) || !v.replicatesFrom(j, i) {
				continue
			}
			if x := v.received(j).extra(pp); x != "" {
				return nil, fmt.Sprintf("%s restarted read-only and %s holds transactions it lacks (%s): it stays read-only; fail over to %s, or make %s writable by hand once you know why", server, v.name(j), x, v.name(j), server)
			}
		}
		out = append(out, Setting{"read_only", "OFF"})
	}
	f, ok := v.facts(i)
	if !ok || !f.SemiSync.Known {
		return out, ""
	}
	st, ok := v.semiSyncPrimaryStep(i)
	if !ok {
		return out, ""
	}
	for _, s := range st.Settings {
		var have string
		switch {
		case strings.HasSuffix(s.Name, "_enabled"):
			have = onOff(f.SemiSync.SourceEnabled)
		case strings.Contains(s.Name, "_wait_no_"):
			have = onOff(f.SemiSync.WaitNoReplica)
		case strings.HasSuffix(s.Name, "_timeout"):
			have = strconv.FormatInt(f.SemiSync.Timeout.Milliseconds(), 10)
		}
		if have != s.Value {
			out = append(out, s)
		}
	}
	return out, ""
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// GuardFenced is what a fenced server (an old primary, a quarantined
// replica) that answers again needs, as steps: kill the connections
// Vigil had open there at the fence (the executor knows which), and, when
// it reports read_only=OFF, end semi-sync master waits (SET GLOBAL
// read_only waits for commits in progress, which wait for
// acknowledgements no replica sends) and set read_only. nil when server
// is not fenced or did not answer.
func GuardFenced(in Input, server string) []Step {
	v, bad := newView(in)
	if bad != "" {
		return nil
	}
	i := v.snap.Index(server)
	if i < 0 || !v.snap.Servers[i].Fenced || !v.ok(i) {
		return nil
	}
	o := v.obs(i)
	steps := []Step{{Kind: KillPreFence, Server: server, OnFail: Continue,
		Detail: fmt.Sprintf("kill the connections Vigil had open on %s when it was fenced (unless it restarted since)", server)}}
	if o.ReadOnly {
		return steps
	}
	f, _ := v.facts(i)
	if o.Flavor != topology.FlavorMySQL && (o.SemiSync.Known || f.SemiSync.Known) {
		src, _ := v.semiSyncNames(i)
		ss := []Setting{{src + "_enabled", "OFF"}}
		steps = append(steps, Step{Kind: SetSemiSync, Server: server, Settings: ss, OnFail: Continue,
			Detail: settingsSQL(ss) + ": its commits may wait for acknowledgements no replica sends; what they commit was committed already (salvage reports it)"})
	}
	return append(steps, Step{Kind: SetReadOnly, Server: server, OnFail: Continue,
		Detail: sqlText(ReadOnlySQL(flavor.OfObservation(o), true)) + ": a fenced server takes no writes from anyone"})
}
