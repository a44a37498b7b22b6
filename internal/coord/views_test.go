package coord

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/failover"
)

// TestViewsAgainstRealEtcd: each instance publishes its view of the
// servers under its lease; the other reads it (not its own), sees a
// change within a moment, the refresh rate stays bounded, and the view of
// an instance that stops renewing its lease disappears with the lease.
func TestViewsAgainstRealEtcd(t *testing.T) {
	ep, _, _ := startEtcd(t)
	prefix := fmt.Sprintf("/vigil-test-%d/", time.Now().UnixNano())
	a := newInstance(t, ep, "a", prefix)
	b := newInstance(t, ep, "b", prefix)

	var mu sync.Mutex
	checked := time.Now().UTC().Truncate(time.Millisecond)
	view := map[string]failover.ServerView{"node1": {OK: true, Checked: checked, LastOK: checked}}
	source := func() map[string]failover.ServerView {
		mu.Lock()
		defer mu.Unlock()
		return map[string]failover.ServerView{"node1": view["node1"]}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Add(2)
	go func() { defer wg.Done(); a.cl.PublishViews(ctx, source) }()
	go func() {
		defer wg.Done()
		b.cl.PublishViews(ctx, func() map[string]failover.ServerView { return nil })
	}()

	var got *failover.Views
	eventually(t, "b reads a's view", 10*time.Second, func() bool {
		got = b.cl.Views(context.Background())
		return got.Err == "" && len(got.Peers) == 1
	})
	if got.Self != "b" || got.Peers[0].Instance != "a" || !got.Peers[0].Servers["node1"].OK || !got.Peers[0].Servers["node1"].LastOK.Equal(checked) {
		t.Fatalf("b read %+v", got)
	}
	if age := time.Since(got.Peers[0].At); age > 2*time.Second {
		t.Errorf("a's view is %s old", age)
	}
	eventually(t, "a reads b's view (and not its own)", 5*time.Second, func() bool {
		own := a.cl.Views(context.Background())
		return len(own.Peers) == 1 && own.Peers[0].Instance == "b"
	})
	// The API's state shows both views, this instance's first.
	eventually(t, "b's state shows its own view and a's", 5*time.Second, func() bool {
		vs := b.cl.State().Views
		return len(vs) == 2 && vs[0].Instance == "b" && vs[1].Instance == "a" && vs[1].Servers["node1"].OK
	})

	// A change is published within a moment, not at the next refresh.
	mu.Lock()
	failed := time.Now().UTC()
	view["node1"] = failover.ServerView{Checked: failed, LastOK: checked, FailingSince: failed, Failure: "timeout"}
	mu.Unlock()
	start := time.Now()
	eventually(t, "b sees node1 failing in a's view", 2*time.Second, func() bool {
		v := b.cl.Views(context.Background())
		return len(v.Peers) == 1 && v.Peers[0].Servers["node1"].Failure == "timeout"
	})
	if took := time.Since(start); took > 600*time.Millisecond {
		t.Errorf("the change took %s to be published", took)
	}

	// Bounded writes: an unchanged view is refreshed about once a second.
	key := a.cl.key("views", "a")
	ver := func() int64 {
		r, err := a.co.cli.Get(context.Background(), key)
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("get %s: %v", key, err)
		}
		return r.Kvs[0].Version
	}
	v0 := ver()
	time.Sleep(3 * time.Second)
	if n := ver() - v0; n < 2 || n > 4 {
		t.Errorf("%d writes of an unchanged view in 3s, want about 3", n)
	}

	// An instance that stops renewing its lease (it died, or lost etcd):
	// its view goes with the lease, within the TTL.
	_ = a.co.cli.Close()
	start = time.Now()
	eventually(t, "a's view gone with its lease", 6*time.Second, func() bool {
		v := b.cl.Views(context.Background())
		return v.Err == "" && len(v.Peers) == 0
	})
	t.Logf("a's view disappeared %s after its client closed", time.Since(start).Round(time.Millisecond))
}

func TestViewChanged(t *testing.T) {
	t1 := time.Unix(100, 0)
	ok := failover.ServerView{OK: true, Checked: t1, LastOK: t1}
	later := failover.ServerView{OK: true, Checked: t1.Add(time.Second), LastOK: t1.Add(time.Second)}
	down := failover.ServerView{Checked: t1, LastOK: t1, FailingSince: t1, Failure: "refused"}
	timeout := down
	timeout.Failure = "timeout"
	for _, c := range []struct {
		name string
		a, b map[string]failover.ServerView
		want bool
	}{
		{"same", map[string]failover.ServerView{"n": ok}, map[string]failover.ServerView{"n": ok}, false},
		{"newer check, same outcome", map[string]failover.ServerView{"n": ok}, map[string]failover.ServerView{"n": later}, false},
		{"stops answering", map[string]failover.ServerView{"n": ok}, map[string]failover.ServerView{"n": down}, true},
		{"fails differently", map[string]failover.ServerView{"n": down}, map[string]failover.ServerView{"n": timeout}, true},
		{"a server added", map[string]failover.ServerView{"n": ok}, map[string]failover.ServerView{"n": ok, "m": ok}, true},
		{"first view", nil, map[string]failover.ServerView{"n": ok}, true},
	} {
		if got := viewChanged(c.a, c.b); got != c.want {
			t.Errorf("%s: changed=%v, want %v", c.name, got, c.want)
		}
	}
}
