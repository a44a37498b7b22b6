package e2e

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-db/vigil/internal/admin"
	"github.com/vigil-db/vigil/internal/lifecycle"
)

// clonesController is an admin Controller with a running clone whose
// stream moves at every read, and a failed one: what the dashboard's
// clone panel draws. The other methods of admin.Controller panic.
type clonesController struct {
	admin.Controller
	mu    sync.Mutex
	bytes int64
}

func (c *clonesController) Servers() []admin.ServerView {
	return []admin.ServerView{{Name: "db1", Cluster: "main", Role: "primary", State: "ONLINE", Writer: true, Writable: true, Readable: true}}
}

func (c *clonesController) Events(string, string, string, time.Time, int) []admin.Event { return nil }

func (c *clonesController) Digests(admin.DigestQuery) (any, error) { return []any{}, nil }

func (c *clonesController) Clone(context.Context, admin.CloneRequest) (any, error) {
	return nil, &admin.Error{Status: 409, Message: "not in this test"}
}

func (c *clonesController) Clones() any {
	c.mu.Lock()
	c.bytes = min(c.bytes+(1<<20), 90<<20)
	n := c.bytes
	c.mu.Unlock()
	started := time.Now().Add(-time.Minute)
	finished := started.Add(10 * time.Second)
	// Progress as JSON, with the kind another engineer may add.
	type progress struct {
		lifecycle.Progress
		Kind string `json:"kind,omitempty"`
	}
	return map[string]any{
		"running": []progress{{Kind: "rebuild", Progress: lifecycle.Progress{ID: 2, Cluster: "main", Target: "db3", Donor: "db2",
			Phase: lifecycle.PhaseStreaming, Path: lifecycle.PathDirect, Bytes: n, TotalBytes: 100 << 20, RateBytes: 50 << 20, ETASeconds: 95, Started: started, Running: true}}},
		"finished": []progress{{Progress: lifecycle.Progress{ID: 1, Cluster: "main", Target: "db2", Donor: "db1", Phase: lifecycle.PhaseFailed,
			Bytes: 0, TotalBytes: 100 << 20, ETASeconds: -1, Started: started, Finished: &finished,
			Error: "target db2 has too little disk space: 9.9 MiB free beside its datadir, a copy of the donor's datadir needs 87.9 MiB"}}},
	}
}

// cloneRow is a clone as the panel draws it.
type cloneRow struct {
	Target, Phase, Kind, Text, Rate, ETA, Bytes string
	Value, Max                                  float64
}

const readCloneRows = `[...document.querySelectorAll('#clone-list tr.clone')].map(r => ({
	Target: r.dataset.target, Phase: r.dataset.phase, Kind: r.dataset.kind || '', Text: r.textContent,
	Rate: r.querySelector('.rate').textContent, ETA: r.querySelector('.eta').textContent, Bytes: r.querySelector('.bytes').textContent,
	Value: r.querySelector('progress').value, Max: r.querySelector('progress').max}))`

// TestDashboardClones drives the dashboard's clone panel in a real
// headless Chromium against the admin server with a fake controller: a
// running clone with its progress bar, bytes, rate, ETA and kind, which
// moves as the stream refreshes, and a failed one with its error.
func TestDashboardClones(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	chrome := findChromium(t)
	a := admin.New(admin.Options{Token: "tok"}, &clonesController{}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	srv := httptest.NewServer(a.Handler())
	// Closed after the browser (cleanups run last first): the page's
	// stream holds a connection until then.
	t.Cleanup(srv.Close)
	b := newBrowser(t, chrome)
	if err := b.run(30*time.Second, chromedp.Navigate(srv.URL+"/ui/#token=tok"), chromedp.WaitVisible("#clone-list tr.clone", chromedp.ByQuery)); err != nil {
		t.Fatalf("open the dashboard and wait for the clone panel: %v", err)
	}
	var first []cloneRow
	if err := b.run(5*time.Second, chromedp.Evaluate(readCloneRows, &first)); err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 {
		t.Fatalf("clone rows: %+v", first)
	}
	r, f := first[0], first[1]
	if r.Target != "db3" || r.Phase != "streaming" || r.Kind != "rebuild" || !strings.Contains(r.Text, "db3 ← db2") || !strings.Contains(r.Text, "agent to agent") ||
		r.Max != 100<<20 || r.Value <= 0 || r.Rate != "50 MiB/s" || r.ETA != "1 min 35 s" || !strings.HasSuffix(r.Bytes, "/ 100 MiB") {
		t.Errorf("running clone: %+v", r)
	}
	if f.Target != "db2" || f.Phase != "failed" || f.Kind != "" || f.ETA != "–" {
		t.Errorf("failed clone: %+v", f)
	}
	var errText string
	if err := b.run(5*time.Second, chromedp.Text(`#clone-list tr.clone-error td`, &errText, chromedp.ByQuery)); err != nil ||
		!strings.Contains(errText, "target db2 has too little disk space") {
		t.Errorf("failed clone's error row: %q %v", errText, err)
	}
	// The panel refreshes with the stream: the bar moves.
	b.waitJS(t, 10*time.Second, "the progress bar to move", `document.querySelector('#clone-list tr.clone progress').value > `+
		strconv.FormatFloat(r.Value, 'f', 0, 64))
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("page errors: %v", errs)
	}
	var png []byte
	if err := b.run(15*time.Second, chromedp.FullScreenshot(&png, 100)); err == nil {
		path := filepath.Join(screenshotDir(t), "clones.png")
		if os.WriteFile(path, png, 0o644) == nil {
			t.Logf("screenshot %s", path)
		}
	}
}
