package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/lifecycle"
)

const (
	cloneUsage   = "vigil ctl clone TARGET [--from DONOR] [--rate BYTES/s, e.g. 50MiB] [--wait | --dry-run]"
	rebuildUsage = "vigil ctl rebuild NODE [--from DONOR] [--rate BYTES/s, e.g. 50MiB] [--wait | --dry-run]"
)

// clonesAnswer is GET /api/v1/clone.
type clonesAnswer struct {
	Running  []lifecycle.Progress `json:"running"`
	Finished []lifecycle.Progress `json:"finished"`
}

// clone starts a clone, or a rebuild (kind "rebuild"); with --wait it
// follows it until it ends and exits non-zero when it failed.
func (c *ctlClient) clone(ctx context.Context, cluster string, args []string, kind string) int {
	return c.cloneQuiet(ctx, cluster, args, kind, false)
}

// cloneQuiet is clone; with quiet, a refusal because the target is not
// checked yet (server add --clone, just after the add) exits 3 with no
// message.
func (c *ctlClient) cloneQuiet(ctx context.Context, cluster string, args []string, kind string, quiet bool) int {
	usage := cloneUsage
	if kind == "rebuild" {
		usage = rebuildUsage
	}
	fs := newFlags(kind, c.errw)
	from := fs.String("from", "", "the donor (default: Vigil chooses a caught-up replica)")
	rate := fs.String("rate", "", "limit the stream to this many bytes per second (65536, 50MiB)")
	wait := fs.Bool("wait", false, "follow it until it ends; exit 1 when it failed")
	poll := fs.Duration("poll", time.Second, "with --wait, how often to ask")
	dry := fs.Bool("dry-run", false, "show what it would do (donor, writer, steps) and start nothing")
	target, rest := "", args
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		target, rest = args[0], args[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if target == "" && fs.NArg() == 1 {
		target = fs.Arg(0)
	} else if target == "" || fs.NArg() > 0 {
		fmt.Fprintln(c.errw, usage)
		return 2
	}
	var limit int64
	if *rate != "" {
		v, err := config.ParseSize(*rate)
		if err != nil {
			fmt.Fprintf(c.errw, "vigil ctl %s: --rate: %v\n", kind, err)
			return 2
		}
		limit = v
	}
	status, data, err := c.do(ctx, "POST", "/api/v1/"+kind, admin.CloneRequest{Cluster: cluster, Target: target, From: *from, Rate: limit, DryRun: *dry})
	if err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	if *dry && status == http.StatusOK {
		return c.printDryRun(data)
	}
	if status != http.StatusAccepted && quiet && (strings.Contains(string(data), "not a server") || strings.Contains(string(data), "not been checked")) {
		return 3
	}
	if status != http.StatusAccepted {
		if c.json {
			c.out.Write(data)
			return 1
		}
		return c.fail(status, data)
	}
	var p lifecycle.Progress
	if err := json.Unmarshal(data, &p); err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	if !*wait {
		if c.json {
			c.out.Write(data)
			return 0
		}
		fmt.Fprintf(c.out, "%s %d started: %s from %s (%s); follow it with vigil ctl clones\n", kind, p.ID, p.Target, p.Donor, p.DonorReason)
		return 0
	}
	fmt.Fprintf(c.out, "%s %s from %s (%s)\n", map[string]string{"clone": "cloning", "rebuild": "rebuilding"}[kind], p.Target, p.Donor, p.DonorReason)
	last := ""
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(c.errw, "vigil ctl: stopped waiting; the %s goes on (vigil ctl clones)\n", kind)
			return 1
		case <-time.After(*poll):
		}
		var all clonesAnswer
		status, data, err := c.do(ctx, "GET", "/api/v1/clone", nil)
		if err != nil || status != 200 {
			if err == nil {
				return c.fail(status, data)
			}
			fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
			return 1
		}
		if err := json.Unmarshal(data, &all); err != nil {
			fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
			return 1
		}
		cur, ok := findClone(all, p.ID)
		if !ok {
			fmt.Fprintf(c.errw, "vigil ctl: %s %d is gone (did Vigil restart?); see vigil ctl events --kind %s_failed\n", kind, p.ID, kind)
			return 1
		}
		if cur.Donor != p.Donor {
			fmt.Fprintf(c.out, "the stream from %s failed; restarting from %s (%s)\n", p.Donor, cur.Donor, cur.DonorReason)
			p.Donor = cur.Donor
		}
		if line := progressLine(cur); line != last {
			fmt.Fprintln(c.out, line)
			last = line
		}
		switch cur.Phase {
		case lifecycle.PhaseDone:
			fmt.Fprintf(c.out, "done: %s replicates from GTID %s and is back with the monitor (%s)\n", cur.Target, cur.GTID, took(cur))
			return 0
		case lifecycle.PhaseFailed:
			fmt.Fprintf(c.errw, "vigil ctl: %s failed: %s\n%s stays out of routing; vigil ctl events --kind %s_failed says what to do\n", kind, cur.Error, cur.Target, kind)
			return 1
		}
	}
}

func findClone(all clonesAnswer, id int64) (lifecycle.Progress, bool) {
	for _, p := range append(all.Running, all.Finished...) {
		if p.ID == id {
			return p, true
		}
	}
	return lifecycle.Progress{}, false
}

func took(p lifecycle.Progress) string {
	if p.Finished == nil {
		return time.Since(p.Started).Round(time.Second).String() + " so far"
	}
	return p.Finished.Sub(p.Started).Round(time.Millisecond).String()
}

func mb(n float64) string { return fmt.Sprintf("%.1f MB", n/1e6) }

// progressLine is one clone's state in a line.
func progressLine(p lifecycle.Progress) string {
	switch p.Phase {
	case lifecycle.PhaseStreaming:
		s := fmt.Sprintf("%-11s %s", p.Phase, mb(float64(p.Bytes)))
		if p.TotalBytes > 0 {
			s += " of ~" + mb(float64(p.TotalBytes))
		}
		if p.RateBytes > 0 {
			s += fmt.Sprintf(" at %s/s", mb(p.RateBytes))
		}
		if p.ETASeconds >= 0 {
			s += fmt.Sprintf(", ETA %s", (time.Duration(p.ETASeconds) * time.Second).String())
		}
		return s
	case lifecycle.PhaseFailed:
		return fmt.Sprintf("%-11s %s", p.Phase, p.Error)
	}
	return fmt.Sprintf("%-11s %s streamed at %s/s", p.Phase, mb(float64(p.Bytes)), mb(p.RateBytes))
}

// clones lists the running and the last finished clones.
func (c *ctlClient) clones(ctx context.Context) int {
	var all clonesAnswer
	if exit, done := c.fetch(ctx, "/api/v1/clone", &all); done {
		return exit
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCLUSTER\tTARGET\tDONOR\tPHASE\tBYTES\tRATE\tETA\tSTARTED\tTOOK\tERROR")
	for _, p := range append(all.Running, all.Finished...) {
		eta := "-"
		if p.Phase == lifecycle.PhaseStreaming && p.ETASeconds >= 0 {
			eta = (time.Duration(p.ETASeconds) * time.Second).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s/s\t%s\t%s\t%s\t%s\n", p.ID, p.Cluster, p.Target, p.Donor, p.Phase, mb(float64(p.Bytes)),
			mb(p.RateBytes), eta, p.Started.Local().Format("15:04:05"), took(p), p.Error)
	}
	tw.Flush()
	return 0
}

// printDryRun shows a clone's plan (POST /api/v1/clone with dry_run).
func (c *ctlClient) printDryRun(data []byte) int {
	if c.json {
		c.out.Write(data)
		return 0
	}
	var d lifecycle.DryRun
	if err := json.Unmarshal(data, &d); err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	verb := "clone"
	if d.Kind != "" {
		verb = d.Kind
	}
	fmt.Fprintf(c.out, "dry run: would %s %s in cluster %s from %s (%s); it would then replicate from %s\n", verb, d.Target, d.Cluster, d.Donor, d.DonorReason, d.Writer)
	for i, s := range d.Steps {
		fmt.Fprintf(c.out, "  %d. %s\n", i+1, s)
	}
	fmt.Fprintln(c.out, "nothing was started")
	return 0
}
