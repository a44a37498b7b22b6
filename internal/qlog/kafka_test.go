package qlog

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const testTopic = "vigil-queries"

// consume reads n records of topic from the start, or fails after a while.
func consume(t *testing.T, brokers []string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(testTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records of %d", len(recs), n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		recs = append(recs, fs.Records()...)
	}
	return recs
}

func TestKafka(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	cfg := Config{Kafka: &KafkaConfig{Brokers: c.ListenAddrs(), Topic: testTopic, Linger: 5 * time.Millisecond}}
	l := startLogger(t, cfg, options{})
	const n = 5000
	for i := range n {
		e := queryEntry(uint32(i), fmt.Sprintf("SELECT c FROM sbtest1 WHERE id = %d AND pw = 'secret-password'", i))
		if !l.Log(e) {
			t.Fatalf("entry %d refused", i)
		}
	}
	l.Close()
	if s := sinkStats(t, l, "kafka"); s.Written != n || s.Dropped != 0 || s.Errors != 0 {
		t.Errorf("kafka stats %+v", s)
	}

	seen := make([]bool, n)
	for _, r := range consume(t, c.ListenAddrs(), n) {
		if strings.Contains(string(r.Value), "secret-password") {
			t.Fatalf("a literal reached kafka: %s", r.Value)
		}
		var m map[string]any
		if err := json.Unmarshal(r.Value, &m); err != nil {
			t.Fatalf("invalid record %q: %v", r.Value, err)
		}
		if m["type"] != "query" || m["statement"] != "SELECT c FROM sbtest1 WHERE id = ? AND pw = ?" ||
			m["digest"] != "a1b2c3d4e5f60708" || m["time"] != "2026-11-22T21:00:00.123456Z" || m["server"] != "node2" {
			t.Fatalf("record %s", r.Value)
		}
		s := int(m["session"].(float64))
		if seen[s] {
			t.Fatalf("session %d twice", s)
		}
		seen[s] = true
	}
}

func TestKafkaFullStatements(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := Config{Statements: "full", Kafka: &KafkaConfig{Brokers: c.ListenAddrs(), Topic: testTopic, Compression: "zstd"}}
	l := startLogger(t, cfg, options{})
	l.Log(queryEntry(1, secretStmt))
	l.Close()
	recs := consume(t, c.ListenAddrs(), 1)
	var m map[string]any
	if err := json.Unmarshal(recs[0].Value, &m); err != nil || m["statement"] != secretStmt {
		t.Errorf("record %s (%v)", recs[0].Value, err)
	}
}

// deadBroker returns a loopback address where nothing listens.
func deadBroker(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// With the brokers down, Log never blocks: entries are dropped (by the
// logger or by the Kafka sink), every call is accounted for, and Close
// returns.
func TestKafkaDeadBroker(t *testing.T) {
	cfg := Config{
		Buffer: 4096,
		Kafka:  &KafkaConfig{Brokers: []string{deadBroker(t)}, Topic: testTopic, MaxBuffered: 1000},
	}
	l, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New with an unreachable broker: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		l.Run(ctx)
	}()

	const producers, each = 4, 25000
	var accepted atomic.Uint64
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			e := queryEntry(uint32(p), "SELECT c FROM sbtest1 WHERE id = 42")
			for range each {
				if l.Log(e) {
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		l.Close()
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return")
	}
	<-ran

	st := l.Stats()
	k := sinkStats(t, l, "kafka")
	t.Logf("stats %+v", st)
	if st.Logged+st.Dropped != producers*each || st.Logged != accepted.Load() {
		t.Errorf("Logged %d + Dropped %d != %d attempts (accepted %d)", st.Logged, st.Dropped, producers*each, accepted.Load())
	}
	if st.Dropped+k.Dropped == 0 {
		t.Error("nothing was dropped with the brokers down")
	}
	if k.Written != 0 {
		t.Errorf("written %d to a dead broker", k.Written)
	}
	if k.Written+k.Dropped+k.Errors != st.Logged {
		t.Errorf("kafka sink accounted for %d entries, logged %d", k.Written+k.Dropped+k.Errors, st.Logged)
	}
	if l.Log(queryEntry(1, "SELECT 1")) {
		t.Error("Log accepted after Close")
	}
}
