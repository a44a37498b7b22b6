// Package rules compiles and applies query rules: an ordered list of
// matchers (user, schema, client address, digest text, statement text,
// each negatable) with actions (route, rewrite, cache, block, timeout,
// mirror, log). Compile runs once per configuration; Apply runs once per
// statement, on the session's goroutine, and does not allocate unless a
// rule rewrites the statement.
//
// Digest patterns are matched against the normalised statement text. The
// outcome depends only on the digest, so it is computed once per digest and
// remembered (a bounded map), which makes a hundred digest rules cost one
// map lookup per statement instead of a hundred regular expressions.
package rules

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigil-db/vigil/internal/sqlscan"
)

// Spec is one rule as configured.
type Spec struct {
	Name string `json:"name"`
	// Matchers; empty matches anything, a leading "!" negates.
	User   string `json:"user,omitempty"`
	Schema string `json:"schema,omitempty"`
	Client string `json:"client,omitempty"`
	Digest string `json:"digest,omitempty"`
	Query  string `json:"query,omitempty"`

	Route          string        `json:"route,omitempty"` // "", "writer", "reader" or a server group
	RewritePattern string        `json:"rewrite_pattern,omitempty"`
	RewriteReplace string        `json:"rewrite_replace,omitempty"`
	CacheTTL       time.Duration `json:"cache_ttl_ns,omitempty"`
	Block          *Block        `json:"block,omitempty"`
	Timeout        time.Duration `json:"timeout_ns,omitempty"`
	Mirror         string        `json:"mirror,omitempty"` // a server group
	Log            *bool         `json:"log,omitempty"`
	Continue       bool          `json:"continue,omitempty"`
}

// Block is the error a blocking rule answers with.
type Block struct {
	Code     uint16 `json:"code"`
	SQLState string `json:"sqlstate"`
	Message  string `json:"message"`
}

// Input is what a rule can look at.
type Input struct {
	User   string
	Schema string
	Client netip.Addr
	Digest uint64
	Query  []byte
}

// Result is the combined effect of the rules that matched.
type Result struct {
	Matched  bool
	Rule     string // the last rule that matched
	Route    string
	Query    []byte // the rewritten statement, nil if unchanged
	CacheTTL time.Duration
	Block    *Block
	Timeout  time.Duration
	Mirror   string
	Log      int8 // 0: no rule said, 1: log, -1: do not log
}

// RuleStat is a rule's hit counter.
type RuleStat struct {
	Name string `json:"name"`
	Hits uint64 `json:"hits"`
}

type strMatch struct {
	set bool
	not bool
	val string
}

func (m strMatch) ok(s string) bool { return !m.set || (s == m.val) != m.not }

type rule struct {
	spec   Spec
	user   strMatch
	schema strMatch
	client netip.Prefix
	hasCli bool
	notCli bool
	// digestBit indexes the rule's digest pattern in the per-digest cache
	// (-1: none).
	digestBit int
	query     *regexp.Regexp
	notQuery  bool
	rewrite   *regexp.Regexp
	repl      []byte
	hits      *atomic.Uint64
}

// Set is a compiled rule list. Safe for concurrent use.
type Set struct {
	rules   []rule
	digests []*regexp.Regexp // by digestBit
	notDig  []bool

	mu    sync.RWMutex
	known map[uint64][]uint64 // digest -> bitset of digest patterns that match
}

// maxKnownDigests bounds the per-digest cache; when full it starts over.
const maxKnownDigests = 100000

// Compile builds a rule set. Counters of rules with the same name in prev
// carry over, so a reload does not reset hit counts.
func Compile(specs []Spec, prev *Set) (*Set, error) {
	old := map[string]*atomic.Uint64{}
	if prev != nil {
		for i := range prev.rules {
			old[prev.rules[i].spec.Name] = prev.rules[i].hits
		}
	}
	s := &Set{known: map[uint64][]uint64{}}
	for i, sp := range specs {
		r := rule{spec: sp, digestBit: -1, user: parseStr(sp.User), schema: parseStr(sp.Schema)}
		name := sp.Name
		if name == "" {
			name = fmt.Sprintf("rule-%d", i+1)
			r.spec.Name = name
		}
		if c := sp.Client; c != "" {
			r.hasCli = true
			c, r.notCli = strings.CutPrefix(c, "!")
			p, err := netip.ParsePrefix(c)
			if err != nil {
				a, err2 := netip.ParseAddr(c)
				if err2 != nil {
					return nil, fmt.Errorf("rule %s: client %q is neither an address nor a CIDR prefix", name, c)
				}
				p = netip.PrefixFrom(a, a.BitLen())
			}
			r.client = p.Masked()
		}
		if d := sp.Digest; d != "" {
			pat, not := strings.CutPrefix(d, "!")
			re, err := regexp.Compile(pat)
			if err != nil {
				return nil, fmt.Errorf("rule %s: digest: %w", name, err)
			}
			r.digestBit = len(s.digests)
			s.digests = append(s.digests, re)
			s.notDig = append(s.notDig, not)
		}
		if q := sp.Query; q != "" {
			pat, not := strings.CutPrefix(q, "!")
			re, err := regexp.Compile(pat)
			if err != nil {
				return nil, fmt.Errorf("rule %s: query: %w", name, err)
			}
			r.query, r.notQuery = re, not
		}
		if sp.RewritePattern != "" {
			re, err := regexp.Compile(sp.RewritePattern)
			if err != nil {
				return nil, fmt.Errorf("rule %s: rewrite: %w", name, err)
			}
			r.rewrite, r.repl = re, []byte(sp.RewriteReplace)
		}
		if h := old[name]; h != nil {
			r.hits = h
		} else {
			r.hits = new(atomic.Uint64)
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

func parseStr(v string) strMatch {
	if v == "" {
		return strMatch{}
	}
	val, not := strings.CutPrefix(v, "!")
	return strMatch{set: true, not: not, val: val}
}

// Len is the number of rules.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Stats returns every rule's hit count, in order.
func (s *Set) Stats() []RuleStat {
	if s == nil {
		return nil
	}
	out := make([]RuleStat, len(s.rules))
	for i := range s.rules {
		out[i] = RuleStat{Name: s.rules[i].spec.Name, Hits: s.rules[i].hits.Load()}
	}
	return out
}

// Specs returns the rules as compiled.
func (s *Set) Specs() []Spec {
	if s == nil {
		return nil
	}
	out := make([]Spec, len(s.rules))
	for i := range s.rules {
		out[i] = s.rules[i].spec
	}
	return out
}

// Apply runs the rules over one statement.
func (s *Set) Apply(in *Input) Result {
	var res Result
	if s == nil || len(s.rules) == 0 {
		return res
	}
	var digestBits []uint64
	q := in.Query
	for i := range s.rules {
		r := &s.rules[i]
		if !r.user.ok(in.User) || !r.schema.ok(in.Schema) {
			continue
		}
		if r.hasCli && r.client.Contains(in.Client.Unmap()) == r.notCli {
			continue
		}
		if r.digestBit >= 0 {
			if digestBits == nil {
				digestBits = s.digestMatches(in.Digest, in.Query)
			}
			if digestBits[r.digestBit/64]&(1<<(r.digestBit%64)) == 0 {
				continue
			}
		}
		if r.query != nil && r.query.Match(q) == r.notQuery {
			continue
		}
		if r.rewrite != nil {
			if r.query == nil && !r.rewrite.Match(q) {
				continue
			}
			q = r.rewrite.ReplaceAll(q, r.repl)
			res.Query = q
		}
		r.hits.Add(1)
		res.Matched = true
		res.Rule = r.spec.Name
		sp := &r.spec
		if sp.Block != nil {
			res.Block = sp.Block
			return res
		}
		if sp.Route != "" {
			res.Route = sp.Route
		}
		if sp.CacheTTL > 0 {
			res.CacheTTL = sp.CacheTTL
		}
		if sp.Timeout > 0 {
			res.Timeout = sp.Timeout
		}
		if sp.Mirror != "" {
			res.Mirror = sp.Mirror
		}
		if sp.Log != nil {
			res.Log = -1
			if *sp.Log {
				res.Log = 1
			}
		}
		if !sp.Continue {
			return res
		}
	}
	return res
}

// digestMatches returns, for one digest, which digest patterns match its
// normalised text (negations applied).
func (s *Set) digestMatches(digest uint64, q []byte) []uint64 {
	s.mu.RLock()
	bits, ok := s.known[digest]
	s.mu.RUnlock()
	if ok {
		return bits
	}
	text := sqlscan.Normalize(nil, q)
	bits = make([]uint64, (len(s.digests)+63)/64)
	for i, re := range s.digests {
		if re.Match(text) != s.notDig[i] {
			bits[i/64] |= 1 << (i % 64)
		}
	}
	s.mu.Lock()
	if len(s.known) >= maxKnownDigests {
		clear(s.known)
	}
	s.known[digest] = bits
	s.mu.Unlock()
	return bits
}
