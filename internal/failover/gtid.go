package failover

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/vigil-db/vigil/internal/topology"
)

// position is a server's replication history in one flavor: a MariaDB
// GTID position (the last transaction of every domain) or a MySQL GTID
// set. Positions of different flavors never contain each other.
type position struct {
	flavor topology.Flavor
	maria  topology.GTIDPos
	mysql  gomysql.MysqlGTIDSet
	// bad says why a MySQL set could not be parsed.
	bad string
}

func mariaPos(ps ...topology.GTIDPos) position {
	var out topology.GTIDPos
	for _, p := range ps {
		out = topology.MaxGTIDPos(out, p)
	}
	return position{flavor: topology.FlavorMariaDB, maria: out}
}

func mysqlPos(sets ...string) position {
	p := position{flavor: topology.FlavorMySQL, mysql: gomysql.NewMysqlGTIDSet()}
	for _, s := range sets {
		set, err := gomysql.ParseMysqlGTIDSet(strings.TrimSpace(s))
		if err != nil {
			p.bad = fmt.Sprintf("GTID set %q: %v", s, err)
			continue
		}
		p.mysql = mysqlUnion(p.mysql, *set.(*gomysql.MysqlGTIDSet))
	}
	return p
}

// receivedPos is everything a server has or will have once its relay log
// is applied: MariaDB gtid_current_pos, gtid_slave_pos, gtid_binlog_pos and
// Gtid_IO_Pos; MySQL gtid_executed and Retrieved_Gtid_Set.
func receivedPos(o *topology.Observation) position {
	if o.Flavor == topology.FlavorMySQL {
		sets := []string{o.GTID.Executed}
		if o.Replica != nil {
			sets = append(sets, o.Replica.RetrievedGTIDSet)
		}
		return mysqlPos(sets...)
	}
	p := mariaPos(o.GTID.Current, o.GTID.Slave, o.GTID.Binlog)
	if o.Replica != nil && o.Replica.GTIDIOPos != "" {
		io, err := topology.ParseGTIDPos(o.Replica.GTIDIOPos)
		if err != nil {
			p.bad = err.Error()
		}
		p.maria = topology.MaxGTIDPos(p.maria, io)
	}
	return p
}

// appliedPos is what a server has applied: MariaDB gtid_current_pos,
// gtid_slave_pos and gtid_binlog_pos; MySQL gtid_executed.
func appliedPos(o *topology.Observation) position {
	if o.Flavor == topology.FlavorMySQL {
		return mysqlPos(o.GTID.Executed)
	}
	return mariaPos(o.GTID.Current, o.GTID.Slave, o.GTID.Binlog)
}

func (p position) String() string {
	if p.flavor == topology.FlavorMySQL {
		return mysqlString(p.mysql)
	}
	return p.maria.String()
}

// contains reports whether a server at p has every transaction of q. For
// MariaDB two different transactions at the same sequence number of a
// domain (different server ids) are a divergence, not containment.
func (p position) contains(q position) bool {
	if p.flavor != q.flavor || p.bad != "" || q.bad != "" {
		return false
	}
	if p.flavor == topology.FlavorMySQL {
		return p.mysql.Contain(&q.mysql)
	}
	for _, g := range q.maria {
		i := slices.IndexFunc(p.maria, func(x topology.GTID) bool { return x.Domain == g.Domain })
		if i < 0 || p.maria[i].Seq < g.Seq || (p.maria[i].Seq == g.Seq && p.maria[i].Server != g.Server) {
			return false
		}
	}
	return true
}

func (p position) equal(q position) bool { return p.contains(q) && q.contains(p) }

// union is the position holding p and q (per-domain maximum for MariaDB).
func (p position) union(q position) position {
	if p.flavor != q.flavor {
		return p
	}
	out := position{flavor: p.flavor, bad: cmp.Or(p.bad, q.bad)}
	if p.flavor == topology.FlavorMySQL {
		out.mysql = mysqlUnion(p.mysql, q.mysql)
	} else {
		out.maria = topology.MaxGTIDPos(p.maria, q.maria)
	}
	return out
}

// missing counts the transactions of q that p lacks (exact for MySQL sets;
// for MariaDB, sequence-number distance summed over domains).
func (p position) missing(q position) uint64 {
	if p.flavor != q.flavor {
		return 0
	}
	if p.flavor == topology.FlavorMySQL {
		return mysqlCount(mysqlMinus(q.mysql, p.mysql))
	}
	return p.maria.Behind(q.maria)
}

// extra describes the transactions p has that q lacks, "" for none: for
// MySQL the GTID set p minus q; for MariaDB each domain where p is ahead
// ("domain 0 sequences 101..105 (last 0-1-105)") or holds a different transaction at the same
// sequence number.
func (p position) extra(q position) string {
	if p.flavor != q.flavor {
		return ""
	}
	if p.flavor == topology.FlavorMySQL {
		return mysqlString(mysqlMinus(p.mysql, q.mysql))
	}
	var parts []string
	for _, g := range p.maria {
		s, ok := q.maria.Seq(g.Domain)
		i := slices.IndexFunc(q.maria, func(x topology.GTID) bool { return x.Domain == g.Domain })
		switch {
		case !ok:
			parts = append(parts, fmt.Sprintf("domain %d up to %s (the other has nothing of domain %d)", g.Domain, g, g.Domain))
		case g.Seq > s+1:
			parts = append(parts, fmt.Sprintf("domain %d sequences %d..%d (last %s)", g.Domain, s+1, g.Seq, g))
		case g.Seq == s+1:
			parts = append(parts, g.String())
		case g.Seq == s && q.maria[i].Server != g.Server:
			parts = append(parts, fmt.Sprintf("%s (the other has %s)", g, q.maria[i]))
		}
	}
	return strings.Join(parts, ", ")
}

func mysqlUnion(a, b gomysql.MysqlGTIDSet) gomysql.MysqlGTIDSet {
	out := gomysql.NewMysqlGTIDSet()
	for _, s := range []gomysql.MysqlGTIDSet{a, b} {
		for sid, tags := range s {
			if out[sid] == nil {
				out[sid] = map[gomysql.Tag]gomysql.IntervalSlice{}
			}
			for tag, iv := range tags {
				out[sid][tag] = append(slices.Clone(out[sid][tag]), iv...).Normalize()
			}
		}
	}
	return out
}

// mysqlMinus is a without the transactions of b.
func mysqlMinus(a, b gomysql.MysqlGTIDSet) gomysql.MysqlGTIDSet {
	out := gomysql.NewMysqlGTIDSet()
	for sid, tags := range a {
		for tag, iv := range tags {
			rest := minusIntervals(iv, b[sid][tag])
			if len(rest) == 0 {
				continue
			}
			if out[sid] == nil {
				out[sid] = map[gomysql.Tag]gomysql.IntervalSlice{}
			}
			out[sid][tag] = rest
		}
	}
	return out
}

// minusIntervals removes b from a; both are normalised, half-open
// [Start, Stop) intervals.
func minusIntervals(a, b gomysql.IntervalSlice) gomysql.IntervalSlice {
	var out gomysql.IntervalSlice
	for _, iv := range a {
		start := iv.Start
		for _, cut := range b {
			if cut.Stop <= start || cut.Start >= iv.Stop {
				continue
			}
			if cut.Start > start {
				out = append(out, gomysql.Interval{Start: start, Stop: cut.Start})
			}
			start = max(start, cut.Stop)
		}
		if start < iv.Stop {
			out = append(out, gomysql.Interval{Start: start, Stop: iv.Stop})
		}
	}
	return out
}

func mysqlCount(s gomysql.MysqlGTIDSet) uint64 {
	var n uint64
	for _, tags := range s {
		for _, iv := range tags {
			for _, i := range iv {
				n += uint64(i.Stop - i.Start)
			}
		}
	}
	return n
}

func mysqlString(s gomysql.MysqlGTIDSet) string { return s.String() }

// binlogStateExtra lists what a MariaDB server's binary log holds that
// another's lacks, by @@gtid_binlog_state: every (domain, server id) pair
// of old whose last sequence number is beyond the other's for the same
// pair, or that the other does not have. A position comparison misses a
// former primary's last transaction that no replica received when the new
// primary has since written further in the same domain (0-1-101 against
// 0-2-500); the pairs do not. Empty when either state is unknown.
func binlogStateExtra(old, cur []topology.GTID) string {
	if len(old) == 0 || len(cur) == 0 {
		return ""
	}
	var parts []string
	for _, gap := range topology.StateBeyond(old, cur) {
		g := gap.Last
		if gap.Known {
			first := gap.Other.Seq + 1
			if first < g.Seq {
				// Every sequence number of the pair beyond the other's last.
				parts = append(parts, fmt.Sprintf("%d-%d-%d..%d (the other's last of server %d is %s)", g.Domain, g.Server, first, g.Seq, g.Server, gap.Other))
				continue
			}
			parts = append(parts, fmt.Sprintf("%s (the other's last of server %d is %s)", g, g.Server, gap.Other))
		} else {
			parts = append(parts, fmt.Sprintf("%s (the other has no transaction of server %d in domain %d)", g, g.Server, g.Domain))
		}
	}
	return strings.Join(parts, ", ")
}

// withoutOriginAhead is p with every MariaDB domain whose last GTID was
// written by server sid (its server id in the GTID) and is beyond q's put
// back to q's: a server's own transactions are never missing on it, even
// when the sample of it (q) predates the sample that shows them on a
// replica (p). The monitor reads servers one at a time, so under write
// load a replica's newer sample holds its primary's later writes. MySQL
// positions, and sid 0 (unknown), are returned unchanged.
func (p position) withoutOriginAhead(q position, sid uint32) position {
	if p.flavor != topology.FlavorMariaDB || q.flavor != topology.FlavorMariaDB || sid == 0 {
		return p
	}
	out := p
	out.maria = nil
	for _, g := range p.maria {
		if g.Server == sid {
			if s, ok := q.maria.Seq(g.Domain); ok && g.Seq > s {
				i := slices.IndexFunc(q.maria, func(x topology.GTID) bool { return x.Domain == g.Domain })
				g = q.maria[i]
			}
		}
		out.maria = append(out.maria, g)
	}
	return out
}

// exceptServer is a @@gtid_binlog_state without the pairs of server sid
// (see withoutOriginAhead); sid 0 keeps them all.
func exceptServer(state []topology.GTID, sid uint32) []topology.GTID {
	if sid == 0 {
		return state
	}
	return slices.DeleteFunc(slices.Clone(state), func(g topology.GTID) bool { return g.Server == sid })
}

// ErrantOf lists the transactions a replica's latest check saw applied
// that the primary's latest check did not have ("" when none). The two
// are comparable (ok) only when both answered and the replica's check
// ended before the primary's began: a check reads its position somewhere
// inside it, so with overlapping checks, or checks whose starts alone are
// ordered, the replica may have been read after the primary, whose
// position under write load is then simply older. Self-healing uses it
// to find a replica that replicates cleanly yet holds transactions of its
// own; a switchover to exclude such a candidate.
func ErrantOf(replica, primary *topology.Observation) (extra string, ok bool) {
	if replica == nil || primary == nil || !replica.OK || !primary.OK || replica.Time.Add(replica.Took).After(primary.Time) {
		return "", false
	}
	return appliedPos(replica).extra(appliedPos(primary)), true
}

// MaybeErrant reports whether a replica's latest check may hold a
// transaction the primary's lacks, whatever the order of the two checks:
// what the replica applied beyond the primary's position, less the
// primary's own transactions (under write load a replica read after its
// primary is ahead by those). False means no comparable check (ErrantOf)
// could find anything either; true asks for one.
func MaybeErrant(replica, primary *topology.Observation) bool {
	if replica == nil || primary == nil || !replica.OK || !primary.OK {
		return false
	}
	pp := appliedPos(primary)
	return appliedPos(replica).withoutOriginAhead(pp, primary.ServerID).extra(pp) != ""
}

// Extra lists the transactions of the GTID position have (MariaDB
// gtid_current_pos, MySQL gtid_executed) that other lacks, "" when none:
// the executor's no-errant-transactions check, with the engine's rules
// for each flavour.
func Extra(f topology.Flavor, have, other string) (string, error) {
	if f == topology.FlavorMySQL {
		a, b := mysqlPos(have), mysqlPos(other)
		if a.bad != "" || b.bad != "" {
			return "", fmt.Errorf("%s%s", a.bad, b.bad)
		}
		return a.extra(b), nil
	}
	pa, err := topology.ParseGTIDPos(have)
	if err != nil {
		return "", err
	}
	pb, err := topology.ParseGTIDPos(other)
	if err != nil {
		return "", err
	}
	return mariaPos(pa).extra(mariaPos(pb)), nil
}
