package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// MoveThreshold is the relative change that counts as "moved": 10 %.
const MoveThreshold = 0.10

// Move is one number of this bench next to the same number of the
// previous one.
type Move struct {
	// Case is the case key ("failover" for the failover medians), Label
	// the case for people.
	Case   string `json:"case"`
	Label  string `json:"label"`
	Target string `json:"target"`
	// Metric is qps, p99_ms, proxy_cpu_us_per_query, a qps ratio
	// ("vigil/haproxy") or seconds.
	Metric string  `json:"metric"`
	Prev   float64 `json:"previous"`
	Now    float64 `json:"now"`
	// Change is Now/Prev − 1.
	Change float64 `json:"change"`
	// Moved is |Change| > MoveThreshold; Worse says the move is in the
	// bad direction (less qps, more latency, CPU or seconds).
	Moved bool `json:"moved"`
	Worse bool `json:"worse"`
}

// Comparison is what moved since a previous bench.
type Comparison struct {
	Previous        string    `json:"previous"`
	PreviousStarted time.Time `json:"previous_started"`
	PreviousQuick   bool      `json:"previous_quick"`
	Threshold       float64   `json:"threshold"`
	Moves           []Move    `json:"moves"`
}

// Moved are the moves beyond the threshold.
func (c *Comparison) Moved() []Move {
	var out []Move
	for _, m := range c.Moves {
		if m.Moved {
			out = append(out, m)
		}
	}
	return out
}

// storedResults is the part of a results.json of any schema that a
// comparison needs (schema 1 had a single thread count in its config).
type storedResults struct {
	Schema  int       `json:"schema"`
	Started time.Time `json:"started"`
	Config  struct {
		Quick bool `json:"quick"`
	} `json:"config"`
	Runs     []Measurement `json:"runs"`
	Failover []FailoverRun `json:"failover"`
}

// LoadResults reads a results.json for a comparison: its runs and
// failover runs, and when and how it was made.
func LoadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s storedResults
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Results{Schema: s.Schema, Started: s.Started, Config: Config{Quick: s.Config.Quick}, Runs: s.Runs, Failover: s.Failover}, nil
}

// FindPrevious picks the results.json under outDir to compare a bench
// of the given mode (quick or not) and cases with, among the benches
// before the one in current (timestamped names sort by time): the newest of the same mode that ran at least half of the
// cases; else the one that ran most of them, same mode first, newer
// first. "" for none.
func FindPrevious(outDir, current string, quick bool, cases []string) string {
	entries, err := os.ReadDir(outDir)
	if err != nil {
		return ""
	}
	var dirs []string
	for _, d := range entries {
		p := filepath.Join(outDir, d.Name())
		// Only benches before this one: a report rendered again compares
		// with what came before it, as when it was first written.
		if d.IsDir() && filepath.Clean(p) != filepath.Clean(current) && d.Name() < filepath.Base(current) {
			dirs = append(dirs, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs))) // timestamped names: newest first
	want := map[string]bool{}
	for _, k := range cases {
		want[k] = true
	}
	best, bestSame, bestScore := "", false, -1
	for _, d := range dirs {
		p := filepath.Join(d, "results.json")
		r, err := LoadResults(p)
		if err != nil {
			continue
		}
		seen := map[string]bool{}
		score := 0
		for _, run := range r.Runs {
			if k := run.Key(); want[k] && !seen[k] {
				seen[k] = true
				score++
			}
		}
		if len(r.Failover) > 0 && want["failover"] {
			score++
		}
		same := r.Config.Quick == quick
		if same && 2*score >= len(cases) {
			return p
		}
		if (same && !bestSame) || (same == bestSame && score > bestScore) {
			best, bestSame, bestScore = p, same, score
		}
	}
	return best
}

// Compare sets the medians of cur next to those of prev (summarized
// again, so that results of an older schema compare too), case by case
// and target by target.
func Compare(prev *Results, prevPath string, cur *Results) *Comparison {
	c := &Comparison{Previous: prevPath, PreviousStarted: prev.Started, PreviousQuick: prev.Config.Quick, Threshold: MoveThreshold}
	var keys, targets []string
	seenK, seenT := map[string]bool{}, map[string]bool{}
	for _, r := range prev.Runs {
		if !seenK[r.Key()] {
			seenK[r.Key()] = true
			keys = append(keys, r.Key())
		}
		if !seenT[r.Target] {
			seenT[r.Target] = true
			targets = append(targets, r.Target)
		}
	}
	ps := Summarize(keys, targets, prev.Runs, prev.Failover)
	add := func(key, label, target, metric string, p, n float64, higherBetter bool) {
		if p == 0 || math.IsNaN(p) || math.IsNaN(n) {
			return
		}
		ch := n/p - 1
		m := Move{Case: key, Label: label, Target: target, Metric: metric, Prev: p, Now: n, Change: ch, Moved: math.Abs(ch) > MoveThreshold}
		m.Worse = m.Moved && (ch < 0) == higherBetter
		c.Moves = append(c.Moves, m)
	}
	for _, ss := range cur.Summary.Scenarios {
		old, ok := ps.Case(ss.Case)
		if !ok {
			continue
		}
		for _, t := range ss.Targets {
			o, ok := old.Target(t.Target)
			if !ok {
				continue
			}
			if t.QPS != nil && o.QPS != nil {
				add(ss.Case, ss.Label(), t.Target, "qps", o.QPS.Median, t.QPS.Median, true)
			}
			if t.P99Ms != nil && o.P99Ms != nil {
				add(ss.Case, ss.Label(), t.Target, "p99_ms", o.P99Ms.Median, t.P99Ms.Median, false)
			}
			if t.ProxyCPUUsPerQuery != nil && o.ProxyCPUUsPerQuery != nil {
				add(ss.Case, ss.Label(), t.Target, "proxy_cpu_us_per_query", o.ProxyCPUUsPerQuery.Median, t.ProxyCPUUsPerQuery.Median, false)
			}
		}
		for _, pair := range [][2]string{{TargetVigil, TargetHAProxy}, {TargetVigil, TargetDirect}} {
			n, ok1 := ss.Ratio("qps", pair[0], pair[1])
			p, ok2 := old.Ratio("qps", pair[0], pair[1])
			if ok1 && ok2 {
				add(ss.Case, ss.Label(), pair[0]+"/"+pair[1], "qps ratio", p, n, true)
			}
		}
	}
	if f, pf := cur.Summary.Failover, ps.Failover; f != nil && pf != nil {
		if f.Kill != nil && pf.Kill != nil {
			add("failover", "failover", "vigil", "kill -9 → first write (s)", pf.Kill.Median, f.Kill.Median, false)
		}
		if f.Switchover != nil && pf.Switchover != nil {
			add("failover", "switchover", "vigil", "write pause (s)", pf.Switchover.Median, f.Switchover.Median, false)
		}
	}
	return c
}
