package topology

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"
)

// GTID is one MariaDB global transaction id, domain-server-sequence.
type GTID struct {
	Domain uint32
	Server uint32
	Seq    uint64
}

func (g GTID) String() string {
	return strconv.FormatUint(uint64(g.Domain), 10) + "-" + strconv.FormatUint(uint64(g.Server), 10) + "-" +
		strconv.FormatUint(g.Seq, 10)
}

// GTIDPos is a MariaDB GTID position (@@gtid_current_pos, @@gtid_slave_pos,
// @@gtid_binlog_pos, Gtid_IO_Pos): the last transaction of each replication
// domain, sorted by domain. A position is not a set: 0-1-10 says "everything
// of domain 0 up to sequence 10", whatever server wrote each transaction.
type GTIDPos []GTID

// ParseGTIDPos parses a comma-separated list of domain-server-seq. An empty
// string is the empty position. When a domain appears more than once (as in
// @@gtid_binlog_pos, which lists the last GTID of every server id) the
// highest sequence number wins.
func ParseGTIDPos(s string) (GTIDPos, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var p GTIDPos
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		f := strings.Split(part, "-")
		if len(f) != 3 {
			return nil, fmt.Errorf("GTID %q is not domain-server-sequence", part)
		}
		d, err1 := strconv.ParseUint(f[0], 10, 32)
		sv, err2 := strconv.ParseUint(f[1], 10, 32)
		seq, err3 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("GTID %q is not domain-server-sequence", part)
		}
		g := GTID{Domain: uint32(d), Server: uint32(sv), Seq: seq}
		if i := p.index(g.Domain); i >= 0 {
			if g.Seq > p[i].Seq {
				p[i] = g
			}
			continue
		}
		p = append(p, g)
	}
	slices.SortFunc(p, func(a, b GTID) int { return cmp.Compare(a.Domain, b.Domain) })
	return p, nil
}

// MustParseGTIDPos is ParseGTIDPos for constants in tests and examples.
func MustParseGTIDPos(s string) GTIDPos {
	p, err := ParseGTIDPos(s)
	if err != nil {
		panic(err)
	}
	return p
}

func (p GTIDPos) index(domain uint32) int {
	for i := range p {
		if p[i].Domain == domain {
			return i
		}
	}
	return -1
}

// String is the position as MariaDB writes it.
func (p GTIDPos) String() string {
	var b strings.Builder
	for i, g := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(g.String())
	}
	return b.String()
}

// Seq is the sequence number reached in domain, and whether the domain is
// present at all.
func (p GTIDPos) Seq(domain uint32) (uint64, bool) {
	if i := p.index(domain); i >= 0 {
		return p[i].Seq, true
	}
	return 0, false
}

// AtLeast reports whether p has reached q in every domain of q: a server at
// position p has applied everything a server at q has (assuming both follow
// the same history, which gtid_strict_mode enforces).
func (p GTIDPos) AtLeast(q GTIDPos) bool {
	for _, g := range q {
		s, ok := p.Seq(g.Domain)
		if !ok || s < g.Seq {
			return false
		}
	}
	return true
}

// Behind is how many transactions p is behind q, summed over q's domains
// (0 when p is at or past q everywhere). It ranks candidates; it is exact
// only when sequence numbers have no gaps.
func (p GTIDPos) Behind(q GTIDPos) uint64 {
	var n uint64
	for _, g := range q {
		s, _ := p.Seq(g.Domain)
		if s < g.Seq {
			n += g.Seq - s
		}
	}
	return n
}

// MySQLGTIDSetContains reports whether the MySQL GTID set a (as in
// @@gtid_executed) contains every transaction of b.
func MySQLGTIDSetContains(a, b string) (bool, error) {
	sa, err := gomysql.ParseMysqlGTIDSet(a)
	if err != nil {
		return false, fmt.Errorf("GTID set %q: %w", a, err)
	}
	sb, err := gomysql.ParseMysqlGTIDSet(b)
	if err != nil {
		return false, fmt.Errorf("GTID set %q: %w", b, err)
	}
	return sa.Contain(sb), nil
}

// ParseGTIDList parses a comma-separated list of domain-server-seq and
// keeps every entry (@@gtid_binlog_state has one per domain and server).
func ParseGTIDList(s string) ([]GTID, error) {
	var out []GTID
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := ParseGTIDPos(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}

// StateGap is a (domain, server id) pair of one @@gtid_binlog_state that
// is beyond another's: Last is its last GTID, Other the other state's last
// GTID of the same pair (Known false when it has none).
type StateGap struct {
	Last, Other GTID
	Known       bool
}

// StateBeyond compares two @@gtid_binlog_state lists pair by pair and
// returns the pairs of old that cur lacks, in whole or in part: the
// transactions old's binary log holds that cur's does not.
func StateBeyond(old, cur []GTID) []StateGap {
	var gaps []StateGap
	for _, g := range old {
		i := slices.IndexFunc(cur, func(c GTID) bool { return c.Domain == g.Domain && c.Server == g.Server })
		switch {
		case i < 0:
			gaps = append(gaps, StateGap{Last: g})
		case cur[i].Seq < g.Seq:
			gaps = append(gaps, StateGap{Last: g, Other: cur[i], Known: true})
		}
	}
	return gaps
}

// GTIDState is every GTID variable of one server.
type GTIDState struct {
	// MariaDB: @@gtid_current_pos (binlog or replicated, whichever is newer
	// per domain), @@gtid_binlog_pos, @@gtid_slave_pos.
	Current GTIDPos
	Binlog  GTIDPos
	Slave   GTIDPos
	// BinlogState is MariaDB's @@gtid_binlog_state: the last GTID of every
	// (domain, server id) pair in the binary log. Unlike a position it
	// tells two histories apart that share sequence numbers: a former
	// primary's 0-1-101 is not in a new primary whose state says 0-1-100,
	// even when its own 0-2-500 is further on.
	BinlogState []GTID `json:",omitempty"`
	// Executed is MySQL's @@gtid_executed, as text.
	Executed string
}

// String is the server's position as one string: gtid_current_pos on
// MariaDB, gtid_executed on MySQL.
func (g GTIDState) String() string {
	if g.Executed != "" {
		return g.Executed
	}
	return g.Current.String()
}

// Applied reports whether a server at position pos (its GTID text as the
// monitor last read it) has applied the transaction gtid (a session's last
// write: MariaDB "domain-server-seq", MySQL "uuid:n"). Unknown or
// unparsable positions answer false, so the caller waits on the server.
func Applied(pos, gtid string) bool {
	if pos == "" || gtid == "" {
		return false
	}
	if strings.Contains(gtid, ":") {
		ok, err := MySQLGTIDSetContains(pos, gtid)
		return err == nil && ok
	}
	p, err := ParseGTIDPos(pos)
	if err != nil {
		return false
	}
	q, err := ParseGTIDPos(gtid)
	if err != nil {
		return false
	}
	return p.AtLeast(q)
}

// MaxGTIDPos is the per-domain maximum of two positions, sorted by domain.
func MaxGTIDPos(a, b GTIDPos) GTIDPos {
	out := slices.Clone(a)
	for _, g := range b {
		i := slices.IndexFunc(out, func(x GTID) bool { return x.Domain == g.Domain })
		switch {
		case i < 0:
			out = append(out, g)
		case g.Seq > out[i].Seq:
			out[i] = g
		}
	}
	slices.SortFunc(out, func(x, y GTID) int { return cmp.Compare(x.Domain, y.Domain) })
	return out
}
