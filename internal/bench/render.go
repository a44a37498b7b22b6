package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Render summarizes the runs of an earlier bench again and rewrites its
// results.json, report.md and plots in dir: after a change to the
// summary, the checks or the report, the numbers of a long bench need not
// be measured again. compare is as Options.Compare.
func Render(dir, compare string) (*Results, error) {
	path := filepath.Join(dir, "results.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("%s: %w (only results of schema %d render again)", path, err, ResultsSchema)
	}
	if res.Schema != ResultsSchema {
		return nil, fmt.Errorf("%s has schema %d; only schema %d renders again", path, res.Schema, ResultsSchema)
	}
	for i := range res.Runs {
		r := &res.Runs[i]
		if r.ServerCounters != nil && !selectShareMeaningful(r.ServerCounters, r.Sysbench.Queries) {
			r.ReplicaSelectShare = nil
		}
	}
	var keys []string
	for _, c := range res.Config.Cases {
		keys = append(keys, c.Key)
	}
	res.Summary = Summarize(keys, targetNames(res.Config.Targets, res.Runs), res.Runs, res.Failover)
	res.Comparison = nil
	if compare != "none" {
		prev := compare
		if prev == "" {
			prev = FindPrevious(filepath.Dir(filepath.Clean(dir)), dir, res.Config.Quick, keys)
		}
		if prev != "" {
			if p, err := LoadResults(prev); err == nil {
				res.Comparison = Compare(p, prev, &res)
			}
		}
	}
	var errs []error
	plots, err := WritePlots(dir, &res)
	if err != nil {
		errs = append(errs, err)
	}
	res.Plots = plots
	for _, f := range []struct {
		name string
		fn   func(io.Writer, *Results) error
	}{{"results.json", WriteJSON}, {"report.md", WriteMarkdown}} {
		out, err := os.Create(filepath.Join(dir, f.name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := f.fn(out, &res); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
		}
		if err := out.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return &res, errors.Join(errs...)
}

// selectShareMeaningful reports whether the servers ran enough SELECTs
// in a run for the replicas' share of them to describe the workload: at
// least one for every ten client queries. Without, the SELECTs are the
// monitors' and the bench's own.
func selectShareMeaningful(counters map[string]map[string]int64, queries int64) bool {
	var selects int64
	for _, c := range counters {
		selects += c["Com_select"]
	}
	return queries > 0 && float64(selects) >= 0.1*float64(queries)
}
