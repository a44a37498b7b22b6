package webui_test

import (
	"context"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/webui"
)

// fakeController answers what the dashboard reads; any other method
// panics (the embedded interface is nil).
type fakeController struct {
	admin.Controller
	digestQuery chan admin.DigestQuery
}

func (f *fakeController) Servers() []admin.ServerView {
	lag := 0.5
	return []admin.ServerView{
		{Name: "node1", Cluster: "main", Role: "primary", State: "ONLINE", Writer: true, Writable: true, Readable: true},
		{Name: "node2", Cluster: "main", Role: "replica", State: "SHUNNED", Readable: false, LagSeconds: &lag},
	}
}

func (f *fakeController) Events(cluster, server, kind string, since time.Time, limit int) []admin.Event {
	return nil
}

func (f *fakeController) Digests(q admin.DigestQuery) (any, error) {
	select {
	case f.digestQuery <- q:
	default:
	}
	return []map[string]any{{"digest": "d1", "count": 3}}, nil
}

// The admin server mounts the dashboard: the page without a token, the
// stream only with it.
func TestMountedOnAdminServer(t *testing.T) {
	ctl := &fakeController{digestQuery: make(chan admin.DigestQuery, 1)}
	a := admin.New(admin.Options{Token: "tok"}, ctl, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	if code, _, body := get(t, srv.URL+webui.Prefix); code != 200 || !regexp.MustCompile(`<script src="app.js"`).MatchString(body) {
		t.Errorf("GET %s without a token: %d\n%s", webui.Prefix, code, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, _ := openStream(t, ctx, srv.URL, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("stream without the token: %d, want 401", resp.StatusCode)
	}
	resp, sse := openStream(t, ctx, srv.URL, http.Header{"Authorization": {"Bearer tok"}})
	if resp.StatusCode != 200 {
		t.Fatalf("stream with the token: %d", resp.StatusCode)
	}
	snap := sse.nextSnapshot(t)
	if len(snap.Servers) != 2 || snap.Servers[1].State != "SHUNNED" || len(snap.Events) != 0 || len(snap.Digests) != 1 {
		t.Errorf("snapshot %+v", snap)
	}
	if q := <-ctl.digestQuery; q.Sort != "total" || q.Limit != 10 {
		t.Errorf("digests asked with %+v, want the top 10 by total time", q)
	}
}

// The page must work offline: every asset it loads is its own.
func TestAssetsAreSelfContained(t *testing.T) {
	external := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//|fetch\(\s*["'](https?:)?//`)
	assets := os.DirFS("assets")
	err := fs.WalkDir(assets, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		if m := external.Find(b); m != nil {
			t.Errorf("%s loads something from elsewhere: %s", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
