package ctl

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/vigil-db/vigil/internal/admin"
)

const shardUsage = "vigil ctl shard state SCHEMA online|read_only|offline"

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
	if len(args) != 3 || args[0] != "state" {
		fmt.Fprintln(c.errw, shardUsage)
		return 2
	}
	return c.post(ctx, "/api/v1/shards/state", admin.ShardStateRequest{Schema: args[1], State: strings.ToLower(args[2])})
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
