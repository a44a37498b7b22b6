package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

var reReads = regexp.MustCompile(`read:\s+(\d+)`)

// TestQueryLogKafkaAndDigests runs sysbench through Vigil with the query
// log shipping to an in-process Kafka (franz-go's kfake, a real Kafka
// protocol peer): every statement arrives, digest counts equal sysbench's,
// and with the broker gone sysbench still runs without an error while the
// drop counters rise.
func TestQueryLogKafkaAndDigests(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	const topic = "vigil-queries"
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	kafkaClosed := false
	t.Cleanup(func() {
		if !kafkaClosed {
			kc.Close()
		}
	})
	brokers := kc.ListenAddrs()
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Log.Queries = true
		c.Log.Kafka = &config.LogKafka{Brokers: brokers, Topic: topic, MaxBuffered: 20000,
			Linger: config.Duration{Duration: 5 * time.Millisecond}}
	})
	waitServersOnline(t, env, 3)
	sysbench(t, env.addr, "oltp_point_select", "prepare")
	time.Sleep(time.Second)
	if out, err := env.ctl(t, "digests", "--reset"); err != nil {
		t.Fatalf("digests --reset: %v\n%s", err, out)
	}
	out := sysbench(t, env.addr, "oltp_point_select", "--threads=8", "--time=8", "--report-interval=0", "run")
	if n := sysbenchErrors(out); n != 0 {
		t.Fatalf("sysbench errors: %d\n%s", n, out)
	}
	m := reReads.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no read count in sysbench output:\n%s", out)
	}
	reads, _ := strconv.ParseInt(m[1], 10, 64)
	t.Logf("sysbench point selects: %d", reads)

	// Digests: the point-select shapes count exactly what sysbench ran.
	var rows []struct {
		Text  string `json:"digest_text"`
		Count int64  `json:"count"`
	}
	apiGet(t, env, "/api/v1/digests?limit=1000", &rows)
	var digestReads int64
	for _, r := range rows {
		if strings.HasPrefix(r.Text, "SELECT c FROM sbtest") {
			digestReads += r.Count
		}
	}
	if digestReads != reads {
		t.Errorf("digest counts %d, sysbench reads %d (%+v)", digestReads, reads, rows)
	}

	// Kafka: every point select arrived as a JSON record.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got, auth int64
	deadline := time.Now().Add(30 * time.Second)
	for got < reads && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) {
			var e map[string]any
			if err := json.Unmarshal(r.Value, &e); err != nil {
				t.Fatalf("record is not JSON: %v: %s", err, r.Value)
			}
			switch {
			case e["type"] == "auth":
				auth++
			case e["type"] == "query" && strings.HasPrefix(fmt.Sprint(e["statement"]), "SELECT c FROM sbtest"):
				got++
			}
		})
	}
	if got != reads {
		var ql map[string]any
		apiGet(t, env, "/api/v1/query_log", &ql)
		t.Errorf("kafka has %d point-select records, sysbench ran %d (query log: %v)", got, reads, ql)
	}
	if auth == 0 {
		t.Errorf("no login records in kafka")
	}
	t.Logf("kafka: %d point-select records, %d login records", got, auth)

	// The broker dies: sysbench goes on without errors, drops are counted.
	kc.Close()
	kafkaClosed = true
	out = sysbench(t, env.addr, "oltp_point_select", "--threads=8", "--time=8", "--report-interval=0", "run")
	if n := sysbenchErrors(out); n != 0 {
		t.Fatalf("sysbench errors with the broker down: %d\n%s", n, out)
	}
	var ql struct {
		Enabled bool `json:"enabled"`
		Stats   struct {
			Logged, Dropped uint64
			Sinks           []struct {
				Name                     string
				Written, Dropped, Errors uint64
			}
		} `json:"stats"`
	}
	apiGet(t, env, "/api/v1/query_log", &ql)
	var lost uint64 = ql.Stats.Dropped
	for _, s := range ql.Stats.Sinks {
		lost += s.Dropped
	}
	if lost == 0 {
		t.Errorf("broker down, yet no drops counted: %+v", ql)
	}
	t.Logf("query log with the broker down: %+v", ql.Stats)
}
