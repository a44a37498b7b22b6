package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/shardmove"
)

const shardUsage = `vigil ctl shard state SCHEMA online|read_only|offline
vigil ctl shard move SCHEMA --to CLUSTER [--reverse] [--manual-cutover] [--dry-run | --wait]
vigil ctl shard move SCHEMA --rollback [--dry-run | --wait]   (back over the --reverse connection)
vigil ctl shard cutover SCHEMA [--wait]     (the go-ahead of a --manual-cutover move)
vigil ctl shard abort SCHEMA [--wait]       (undo a move that has not cut over)
vigil ctl shard cleanup SCHEMA [--dry-run | --wait]
vigil ctl shard moves`

// shards prints the sharded listener (GET /api/v1/shards).
func (c *ctlClient) shards(ctx context.Context) int {
	var v admin.ShardsView
	if exit, done := c.fetch(ctx, "/api/v1/shards", &v); done {
		return exit
	}
	fmt.Fprintf(c.out, "sharded listener %s, map version %d, %d sessions\n", v.Listen, v.Version, v.Sessions)
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tWRITER\tSTATEMENTS")
	for _, cl := range v.Clusters {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", cl.Name, dash(cl.Writer), v.Statements[cl.Name])
	}
	tw.Flush()
	fmt.Fprintln(c.out)
	tw = tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEMA\tCLUSTER\tSTATE\tSOURCE")
	for _, s := range v.Schemas {
		cl := s.Cluster
		if len(s.Conflict) > 0 {
			cl = "CONFLICT: " + strings.Join(s.Conflict, ", ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, dash(cl), s.State, s.Source)
	}
	tw.Flush()
	var refused []string
	for k, n := range v.Refused {
		if n > 0 {
			refused = append(refused, fmt.Sprintf("%s %d", k, n))
		}
	}
	sort.Strings(refused)
	if len(refused) > 0 {
		fmt.Fprintf(c.out, "\nrefused: %s\n", strings.Join(refused, ", "))
	}
	return 0
}

// shard runs vigil ctl shard SUBCOMMAND.
func (c *ctlClient) shard(ctx context.Context, args []string) int {
	switch {
	case len(args) == 3 && args[0] == "state":
		return c.post(ctx, "/api/v1/shards/state", admin.ShardStateRequest{Schema: args[1], State: strings.ToLower(args[2])})
	case len(args) >= 2 && (args[0] == "move" || args[0] == "cleanup" || args[0] == "cutover" || args[0] == "abort"):
		return c.shardMove(ctx, args[0], args[1], args[2:])
	case len(args) == 1 && args[0] == "moves":
		return c.get(ctx, "/api/v1/shards/move", nil)
	}
	fmt.Fprintln(c.errw, shardUsage)
	return 2
}

// shardMove starts a move or a cleanup; --wait follows it to its end
// (exit 1 when it failed).
func (c *ctlClient) shardMove(ctx context.Context, kind, schema string, args []string) int {
	fs := flag.NewFlagSet("vigil ctl shard "+kind, flag.ContinueOnError)
	fs.SetOutput(c.errw)
	to := fs.String("to", "", "the cluster the schema moves to")
	dry := fs.Bool("dry-run", false, "show the plan, start nothing")
	reverse := fs.Bool("reverse", false, "keep a replication connection back to the old cluster after the cutover (a rollback window)")
	manual := fs.Bool("manual-cutover", false, "copy and catch up, then wait (following the source) for vigil ctl shard cutover")
	rollback := fs.Bool("rollback", false, "route the schema back to its old cluster over the reverse connection of its last move (made with --reverse)")
	wait := fs.Bool("wait", false, "follow the move until it ends (or, with --manual-cutover, until it waits for the cutover)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || (kind == "move" && (*to != "") == *rollback) || (kind != "move" && (*reverse || *manual || *rollback)) ||
		(*rollback && (*reverse || *manual)) {
		fmt.Fprintln(c.errw, shardUsage)
		return 2
	}
	req := admin.ShardMoveRequest{Schema: schema, To: *to, DryRun: *dry, Reverse: *reverse, ManualCutover: *manual}
	if kind != "move" {
		req.Kind = kind
	}
	if *rollback {
		req.Kind = "rollback"
	}
	status, data, err := c.do(ctx, "POST", "/api/v1/shards/move", req)
	if err != nil {
		fmt.Fprintf(c.errw, "vigil ctl: %v\n", err)
		return 1
	}
	if status != 200 && status != 202 {
		return c.fail(status, data)
	}
	var plan shardmove.Plan
	switch {
	case c.json:
		c.out.Write(data)
	case kind == "cutover" || json.Unmarshal(data, &plan) != nil || len(plan.Steps) == 0:
		// The go-ahead (or abort) of a waiting move answers with its
		// journal.
		fmt.Fprintf(c.out, "%s of the move of %s asked\n", kind, schema)
	default:
		verb := "started"
		if *dry {
			verb = "dry run, nothing started"
		}
		fmt.Fprintf(c.out, "%s (%s)\n", plan.String(), verb)
	}
	if !*wait || *dry {
		return 0
	}
	for {
		var v struct {
			Running *shardmove.Journal `json:"running"`
			Last    *shardmove.Journal `json:"last"`
			Error   string             `json:"error"`
		}
		status, data, err := c.do(ctx, "GET", "/api/v1/shards/move", nil)
		if err != nil || status != 200 || json.Unmarshal(data, &v) != nil {
			fmt.Fprintf(c.errw, "vigil ctl: following the move: %v (status %d)\n", err, status)
			return 1
		}
		if r := v.Running; *manual && r != nil && r.Schema == schema && r.State == shardmove.StateWaiting {
			fmt.Fprintf(c.out, "move of %s: copied to %s and following %s; waiting for the cutover (vigil ctl shard cutover %s)\n", schema, r.To, r.From, schema)
			for _, f := range r.Follows {
				fmt.Fprintf(c.out, "  followed: %s\n", f)
			}
			return 0
		}
		if v.Running == nil && v.Last != nil && v.Last.Schema == schema {
			fmt.Fprintf(c.out, "%s of %s: %s\n", v.Last.Kind, schema, v.Last.State)
			for _, r := range v.Last.Results {
				line := fmt.Sprintf("  %-18s %s", r.Name, r.Detail)
				if r.Error != "" {
					line += "  ERROR: " + r.Error
				}
				fmt.Fprintln(c.out, line)
			}
			for _, f := range v.Last.Follows {
				fmt.Fprintf(c.out, "  followed: %s\n", f)
			}
			if v.Error != "" {
				fmt.Fprintf(c.errw, "vigil ctl: %s\n", v.Error)
				return 1
			}
			return 0
		}
		select {
		case <-ctx.Done():
			return 1
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
