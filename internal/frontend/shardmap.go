package frontend

// The shard map and the pure decision of which cluster a statement goes
// to through the sharded listener (shard.go runs it; docs/shards.md).

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vigil-db/vigil/internal/mysqlproto"
	"github.com/vigil-db/vigil/internal/sqlscan"
)

// ShardState is a schema's shard state (Jetpants' shard states).
type ShardState uint8

// Shard states.
const (
	ShardOnline   ShardState = iota // every statement runs
	ShardReadOnly                   // writes are refused (7018)
	ShardOffline                    // every statement is refused (7019)
)

var shardStateNames = [...]string{ShardOnline: "online", ShardReadOnly: "read_only", ShardOffline: "offline"}

func (s ShardState) String() string {
	if int(s) < len(shardStateNames) {
		return shardStateNames[s]
	}
	return "state?"
}

// ParseShardState reads online, read_only or offline.
func ParseShardState(s string) (ShardState, bool) {
	i := slices.Index(shardStateNames[:], s)
	return ShardState(max(i, 0)), i >= 0
}

// ShardMap is what the sharded listener routes by. A published map is
// never changed: a change publishes a new one with a higher Version.
type ShardMap struct {
	// Version only grows (the etcd revision when coordinated).
	Version uint64
	// Clusters are the clusters behind the listener; the first one
	// serves statements that name no schema and have no default one.
	Clusters []string
	// Schemas names the authoritative cluster of a schema.
	Schemas map[string]string
	// States holds the schemas that are not online.
	States map[string]ShardState
}

// first is the cluster that serves statements that name no schema and
// have no default one.
func (m *ShardMap) first() string { return firstOf(m.Clusters) }

// firstOf is l's first element, "" for none.
func firstOf(l []string) string {
	for _, s := range l {
		return s
	}
	return ""
}

// state is schema's shard state.
func (m *ShardMap) state(schema string) ShardState { return m.States[schema] }

// SystemSchema reports whether a schema exists on every server
// (information_schema, mysql, performance_schema, sys): it names no shard.
func SystemSchema(name string) bool { return systemSchema(name) }

func systemSchema(name string) bool {
	switch strings.ToLower(name) {
	case "information_schema", "mysql", "performance_schema", "sys":
		return true
	}
	return false
}

// placement is where a schema is: its cluster, or the clusters that all
// have it (ambiguous), or nowhere known.
type placement struct {
	cluster   string
	ambiguous []string
}

// found reports whether the schema is on exactly one known cluster.
func (p placement) found() bool { return p.cluster != "" }

// schemaLocator finds schemas: the map first, then what discovery saw on
// the clusters' primaries (by cluster, for one user).
type schemaLocator struct {
	m    *ShardMap
	seen map[string][]string // schema -> clusters that list it
}

func (l schemaLocator) locate(schema string) placement {
	if c, ok := l.m.Schemas[schema]; ok {
		return placement{cluster: c}
	}
	switch on := l.seen[schema]; len(on) {
	case 0:
		return placement{}
	case 1:
		return placement{cluster: firstOf(on)}
	default:
		return placement{ambiguous: on}
	}
}

// shardStmt is what the decision needs of one statement.
type shardStmt struct {
	class sqlscan.Class
	// refs are the schemas the statement names; certain: named as a
	// schema (not a qualifier that may be a table or an alias).
	refs []shardRef
	// overflow: it names more schemas than were collected.
	overflow bool
	// use: the statement is USE (or COM_INIT_DB) of this schema.
	use string
}

type shardRef struct {
	name    string
	certain bool
}

// shardSession is what the decision needs of the session.
type shardView struct {
	schema string // the default schema
	trx    string // the cluster holding the session's open transaction
	last   string // the cluster of the previous statement
}

// shardDecision is where a statement goes, or why it is refused.
type shardDecision struct {
	cluster string
	// unknown: a schema named for sure was found nowhere; after a fresh
	// discovery the statement goes to cluster anyway (the server answers
	// "unknown database").
	unknown string
	// schemas are the schemas the statement concerns: those it names, or
	// the default schema when it names none (what shard states and holds
	// apply to).
	schemas []string
	err     *mysqlproto.SQLError
}

// decideShard is the pure routing decision of the sharded listener.
func decideShard(l schemaLocator, st shardStmt, v shardView) shardDecision {
	var d shardDecision
	var named []string // schemas that decided the cluster
	pick := func(schema string, p placement) *mysqlproto.SQLError {
		if d.cluster != "" && d.cluster != p.cluster {
			return crossClusterError(firstOf(named), d.cluster, schema, p.cluster)
		}
		d.cluster = p.cluster
		named = append(named, schema)
		return nil
	}
	if st.use != "" {
		st.refs = append(st.refs, shardRef{name: st.use, certain: true})
	}
	for _, r := range st.refs {
		if systemSchema(r.name) || slices.Contains(named, r.name) {
			continue
		}
		p := l.locate(r.name)
		switch {
		case len(p.ambiguous) > 0 && (r.certain || l.m.Schemas[r.name] == ""):
			return shardDecision{err: ambiguousError(r.name, p.ambiguous)}
		case p.found():
			if err := pick(r.name, p); err != nil {
				return shardDecision{err: err}
			}
		case r.certain && d.unknown == "":
			d.unknown = r.name
		}
	}
	if st.overflow && len(named) > 0 {
		// Too many names to check them all: refuse rather than guess.
		return shardDecision{err: mysqlproto.NewError(mysqlproto.ERVigilShardCrossCluster, mysqlproto.SSVigilUnsupported,
			"Vigil: the statement names too many schemas for the sharded listener to check that they are on one cluster; split it")}
	}
	if d.cluster == "" {
		d.cluster = defaultCluster(l, st, v)
	}
	if v.trx != "" && d.cluster != v.trx {
		what := "schema " + quoteName(v.schema)
		if len(named) > 0 {
			what = "schema " + quoteName(firstOf(named))
		}
		return shardDecision{err: mysqlproto.NewError(mysqlproto.ERVigilShardCrossCluster, mysqlproto.SSVigilUnsupported,
			"Vigil: this transaction runs on cluster %s; %s is on cluster %s: a transaction runs on one cluster (commit or roll back first)",
			v.trx, what, d.cluster)}
	}
	d.schemas = concerned(named, v)
	if err := stateError(l.m, st, d.schemas, d.cluster); err != nil {
		return shardDecision{err: err}
	}
	return d
}

// concerned are the schemas a statement concerns: those it names, or the
// default schema when it names none.
func concerned(named []string, v shardView) []string {
	if len(named) == 0 && v.schema != "" && !systemSchema(v.schema) {
		return []string{v.schema}
	}
	return named
}

// defaultCluster is where a statement that names no known schema goes:
// transaction control and SET follow the open transaction or the previous
// statement; anything else the default schema's cluster (its unqualified
// names are the default schema's), then the previous statement's, then
// the first cluster.
func defaultCluster(l schemaLocator, st shardStmt, v shardView) string {
	switch st.class {
	case sqlscan.ClassCommit, sqlscan.ClassRollback, sqlscan.ClassSavepoint, sqlscan.ClassSet:
		if v.trx != "" {
			return v.trx
		}
		if v.last != "" {
			return v.last
		}
	}
	if v.trx != "" && v.schema == "" {
		return v.trx
	}
	if v.schema != "" && !systemSchema(v.schema) {
		if p := l.locate(v.schema); p.found() {
			return p.cluster
		}
	}
	if v.trx != "" {
		return v.trx
	}
	if v.last != "" {
		return v.last
	}
	return l.m.first()
}

// stateError refuses a statement on an offline schema, or a write on a
// read_only one. The schemas concerned are those it names, or the
// default schema when it names none.
func stateError(m *ShardMap, st shardStmt, schemas []string, cluster string) *mysqlproto.SQLError {
	if len(m.States) == 0 {
		return nil
	}
	for _, s := range schemas {
		switch m.state(s) {
		case ShardOffline:
			return mysqlproto.NewError(mysqlproto.ERVigilShardOffline, mysqlproto.SSVigilUnavailable,
				"Vigil: schema %s is offline (shard state); nothing runs on it until an operator sets it online", quoteName(s))
		case ShardReadOnly:
			if shardWrite(st.class) {
				return mysqlproto.NewError(mysqlproto.ERVigilShardReadOnly, mysqlproto.SSVigilShardReadOnly,
					"Vigil: schema %s is read_only (shard state) on cluster %s: writes are refused, reads go on", quoteName(s), cluster)
			}
		}
	}
	return nil
}

// shardWrite reports whether a statement class may change data.
func shardWrite(c sqlscan.Class) bool {
	switch c {
	case sqlscan.ClassWrite, sqlscan.ClassUnknown, sqlscan.ClassBegin:
		return true
	}
	return false
}

func crossClusterError(a, ca, b, cb string) *mysqlproto.SQLError {
	return mysqlproto.NewError(mysqlproto.ERVigilShardCrossCluster, mysqlproto.SSVigilUnsupported,
		"Vigil: the statement needs two clusters: schema %s is on cluster %s and schema %s on cluster %s; a statement runs on one cluster (query them separately)",
		quoteName(a), ca, quoteName(b), cb)
}

func ambiguousError(schema string, on []string) *mysqlproto.SQLError {
	return mysqlproto.NewError(mysqlproto.ERVigilShardAmbiguous, mysqlproto.SSVigilShardAmbiguous,
		"Vigil: schema %s exists on clusters %s: name the one that holds it in shards.map (or drop the stale copy)",
		quoteName(schema), strings.Join(on, " and "))
}

func quoteName(s string) string { return fmt.Sprintf("`%s`", strings.ReplaceAll(s, "`", "``")) }
