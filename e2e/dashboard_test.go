package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/vigil-db/vigil/internal/config"
	"github.com/vigil-db/vigil/internal/sandbox"
)

// requireBrowserEnv makes a missing browser a failure instead of a skip
// (CI sets it: it installs Debian's chromium).
const requireBrowserEnv = "VIGIL_E2E_REQUIRE_BROWSER"

// updateDocsEnv makes TestDashboard copy its last screenshot to
// docs/img/dashboard.png, the picture of the README.
const updateDocsEnv = "VIGIL_E2E_UPDATE_DOCS"

// TestDashboard drives the web dashboard in a real headless Chromium: the
// page shows the sandbox topology, a paused replica turns SHUNNED, a drain
// and an undrain from the page take effect, and a switchover started from
// the page moves the primary. Screenshots of each step go to
// test-artifacts/TestDashboard/.
func TestDashboard(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e")
	}
	chrome := findChromium(t)
	const token = "e2e-dashboard-token"
	t.Setenv("VIGIL_ADMIN_TOKEN", token) // for env.ctl
	const adminUser, adminPassword = "dba", "dba-pässword"
	env := newClusterEnv(t, sandbox.Options{Topology: sandbox.Replication, Nodes: 3}, func(c *config.Config) {
		c.Admin.Token = token
		c.Admin.User, c.Admin.Password = adminUser, adminPassword
	})
	shots := screenshotDir(t)
	stopLoad := dashboardLoad(t, fmt.Sprintf("app:app@tcp(%s)/vigil_test?timeout=5s&readTimeout=5s&writeTimeout=5s", env.addr))
	defer stopLoad()

	b := newBrowser(t, chrome)
	shot := func(name string) {
		t.Helper()
		var png []byte
		if err := b.run(15*time.Second, chromedp.FullScreenshot(&png, 100)); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		t.Logf("screenshot %s (%d KB)", path, len(png)/1024)
	}
	t.Cleanup(func() {
		if t.Failed() {
			shot("failed")
		}
	})

	// The page loads without the token, asks for it, then draws the
	// topology from the authenticated stream.
	url := "http://" + env.admin + "/ui/"
	if err := b.run(30*time.Second, chromedp.Navigate(url), chromedp.WaitVisible("#login-form", chromedp.ByQuery)); err != nil {
		t.Fatalf("open %s and wait for the token form: %v", url, err)
	}
	shot("01-token")
	if err := b.run(15*time.Second,
		chromedp.SendKeys("#token-input", token, chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitNotVisible("#login", chromedp.ByQuery),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}
	b.waitNodes(t, 20*time.Second, "node1 primary, node2 and node3 ONLINE replicas", func(n map[string]domNode) error {
		if len(n) != 3 {
			return fmt.Errorf("%d nodes drawn", len(n))
		}
		if s := n["node1"]; s.Role != "primary" || s.Writer != "true" || s.State != "ONLINE" {
			return fmt.Errorf("node1 %+v", s)
		}
		for _, r := range []string{"node2", "node3"} {
			if s := n[r]; s.Role != "replica" || s.Writer != "false" || s.State != "ONLINE" {
				return fmt.Errorf("%s %+v", r, s)
			}
		}
		return nil
	})
	b.waitJS(t, 10*time.Second, "the live indicator and the digests", `document.querySelector('#conn').dataset.state === 'live' &&
		document.querySelectorAll('#digests tbody tr').length > 0`)
	shot("02-topology")

	// A paused replica (SIGSTOP) fails its checks: SHUNNED on the page.
	ctx := context.Background()
	if err := env.sb.Pause(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	paused := true
	defer func() {
		if paused {
			_ = env.sb.Resume(ctx, "node3")
		}
	}()
	b.waitNodes(t, 15*time.Second, "node3 SHUNNED", func(n map[string]domNode) error {
		if s := n["node3"]; s.State != "SHUNNED" {
			return fmt.Errorf("node3 %+v", s)
		}
		return nil
	})
	b.waitJS(t, 10*time.Second, "a state_change event of node3 in the timeline",
		`[...document.querySelectorAll('#timeline li[data-kind="state_change"]')].some(li => li.textContent.includes('node3'))`)
	shot("03-node3-shunned")
	if err := env.sb.Resume(ctx, "node3"); err != nil {
		t.Fatal(err)
	}
	paused = false
	b.waitNodes(t, 20*time.Second, "node3 ONLINE again", func(n map[string]domNode) error {
		if s := n["node3"]; s.State != "ONLINE" {
			return fmt.Errorf("node3 %+v", s)
		}
		return nil
	})

	// Drain node3 from its row, then put it back.
	b.click(t, `tr[data-server="node3"] button.drain`)
	b.waitNodes(t, 10*time.Second, "node3 OFFLINE_SOFT", func(n map[string]domNode) error {
		if s := n["node3"]; s.State != "OFFLINE_SOFT" {
			return fmt.Errorf("node3 %+v", s)
		}
		return nil
	})
	if s := env.server(t, "node3"); s.State != "OFFLINE_SOFT" {
		t.Errorf("the API shows node3 %s after the drain", s.State)
	}
	shot("04-node3-drained")
	b.click(t, `tr[data-server="node3"] button.online`)
	b.waitNodes(t, 15*time.Second, "node3 ONLINE after undrain", func(n map[string]domNode) error {
		if s := n["node3"]; s.State != "ONLINE" {
			return fmt.Errorf("node3 %+v", s)
		}
		return nil
	})

	// Switchover to node2 from the page (the confirm dialog is accepted).
	if err := b.run(10*time.Second, chromedp.SetValue(`select.switchover-target`, "node2", chromedp.ByQuery)); err != nil {
		t.Fatalf("choose node2: %v", err)
	}
	b.click(t, `button.switchover`)
	b.waitJS(t, 60*time.Second, "the switchover's result message", `document.querySelector('#message').dataset.kind === 'ok' ||
		document.querySelector('#message').dataset.kind === 'error'`)
	var msg struct{ Kind, Text string }
	_ = b.run(5*time.Second, chromedp.Evaluate(`({Kind: document.querySelector('#message').dataset.kind, Text: document.querySelector('#message').textContent})`, &msg))
	t.Logf("page says: %s", msg.Text)
	if msg.Kind != "ok" || !strings.Contains(msg.Text, "node2") {
		t.Fatalf("switchover from the page: %s: %s", msg.Kind, msg.Text)
	}
	b.waitNodes(t, 20*time.Second, "node2 primary and writer", func(n map[string]domNode) error {
		if s := n["node2"]; s.Role != "primary" || s.Writer != "true" || s.State != "ONLINE" {
			return fmt.Errorf("node2 %+v", s)
		}
		if s := n["node1"]; s.Writer != "false" {
			return fmt.Errorf("node1 %+v", s)
		}
		return nil
	})
	Eventually(t, 10*time.Second, "the API agrees node2 is the writer", func() error {
		if w := env.writer(t); w != "node2" {
			return fmt.Errorf("writer %q", w)
		}
		return nil
	})
	b.waitJS(t, 10*time.Second, "the switchover in the timeline", `document.querySelector('#timeline').textContent.includes('node2')`)
	// The old primary now replicates: its lag becomes a number.
	b.waitJS(t, 15*time.Second, "a replication lag for node1", `/^[0-9]/.test(document.querySelector('tr[data-server="node1"] .lag').textContent)`)
	shot("05-switchover")

	if d := b.dialogs(); len(d) != 3 {
		t.Errorf("the page asked for confirmation %d times, want 3 (drain, online, switchover): %q", len(d), d)
	} else if !strings.Contains(d[2], "node1") || !strings.Contains(d[2], "node2") {
		t.Errorf("the switchover confirmation does not name both servers: %q", d[2])
	}
	if errs := b.jsErrors(); len(errs) > 0 {
		t.Errorf("JavaScript errors on the page:\n%s", strings.Join(errs, "\n"))
	}
	// A link may carry the token in its fragment (never sent to the
	// server): the page keeps it and drops it from the address bar.
	var hash string
	if err := b.run(30*time.Second,
		chromedp.Evaluate(`sessionStorage.clear()`, nil),
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(url+"#token="+token),
		chromedp.WaitVisible(`svg.graph .node[data-server="node2"][data-writer="true"]`, chromedp.ByQuery),
		chromedp.Evaluate(`location.hash`, &hash),
	); err != nil {
		t.Errorf("open the page with #token=: %v", err)
	} else if hash != "" {
		t.Errorf("the token stays in the address bar: %q", hash)
	}
	// Basic auth with admin.user and admin.password instead of the token:
	// a wrong password is refused on the page, the right one signs in.
	if err := b.run(30*time.Second,
		chromedp.Evaluate(`sessionStorage.clear()`, nil),
		chromedp.Navigate("about:blank"),
		chromedp.Navigate(url),
		chromedp.WaitVisible("#login-form", chromedp.ByQuery),
		chromedp.SendKeys("#user-input", adminUser, chromedp.ByQuery),
		chromedp.SendKeys("#token-input", "wrong", chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitVisible("#login-error", chromedp.ByQuery),
	); err != nil {
		t.Errorf("a wrong admin password is not refused on the page: %v", err)
	}
	var stored string
	if err := b.run(30*time.Second,
		chromedp.SendKeys("#token-input", adminPassword, chromedp.ByQuery),
		chromedp.Click("#login-submit", chromedp.ByQuery),
		chromedp.WaitNotVisible("#login", chromedp.ByQuery),
		chromedp.WaitVisible(`svg.graph .node[data-server="node1"]`, chromedp.ByQuery),
		chromedp.Evaluate(`sessionStorage.getItem('vigil.admin.token') || ''`, &stored),
	); err != nil {
		t.Errorf("sign in with admin.user and admin.password: %v", err)
	} else if !strings.HasPrefix(stored, "Basic ") {
		t.Errorf("the page keeps %q, want basic-auth credentials", stored)
	}
	shot("06-basic-auth")
	if os.Getenv(updateDocsEnv) != "" {
		updateDocScreenshot(t, filepath.Join(shots, "05-switchover.png"))
	}
}

// findChromium returns the browser to drive, or skips the test when there
// is none and requireBrowserEnv is not set.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "e2e: no chromium for the dashboard test: install Debian's package chromium (apt-get install chromium)"
	if os.Getenv(requireBrowserEnv) != "" {
		t.Fatalf("%s (%s is set, so this is a failure)", msg, requireBrowserEnv)
	}
	t.Skipf("%s; set %s=1 to fail instead of skipping", msg, requireBrowserEnv)
	return ""
}

// screenshotDir is test-artifacts/<test>/ at the repository root, emptied
// of older screenshots.
func screenshotDir(t *testing.T) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "test-artifacts", unsafeName.ReplaceAllString(t.Name(), "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	return dir
}

func updateDocScreenshot(t *testing.T, src string) {
	t.Helper()
	root, _ := RepoRoot()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Errorf("docs screenshot: %v", err)
		return
	}
	if len(data) > 300<<10 {
		t.Errorf("docs screenshot: %s is %d KB, over 300 KB", src, len(data)>>10)
		return
	}
	dst := filepath.Join(root, "docs", "img", "dashboard.png")
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
		err = os.WriteFile(dst, data, 0o644)
	}
	if err != nil {
		t.Errorf("docs screenshot: %v", err)
		return
	}
	t.Logf("copied %s to %s", src, dst)
}

// dashboardLoad sends a little traffic through Vigil so that the digests
// table has rows and rates; errors (during the switchover) are ignored.
func dashboardLoad(t *testing.T, dsn string) (stop func()) {
	db := openDB(t, dsn)
	db.SetMaxOpenConns(2)
	mustExec(t, db, "CREATE TABLE IF NOT EXISTS vigil_test.dash (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			qctx, qcancel := context.WithTimeout(ctx, 2*time.Second)
			var n int
			_ = db.QueryRowContext(qctx, "SELECT COUNT(*) FROM vigil_test.dash WHERE v > ?", i%10).Scan(&n)
			if i%4 == 0 {
				_, _ = db.ExecContext(qctx, "INSERT INTO vigil_test.dash (v) VALUES (?)", i%10)
			}
			qcancel()
			select {
			case <-ctx.Done():
			case <-time.After(40 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// browser is one headless Chromium with one tab.
type browser struct {
	ctx context.Context

	mu      sync.Mutex
	dialog  []string
	errs    []string
	console []string
}

func newBrowser(t *testing.T, exe string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // the tests run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(1440, 1000),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(format string, args ...any) {
		// Events newer than the protocol bindings are not errors of
		// the page: keep them out of the test log.
		if s := fmt.Sprintf(format, args...); !strings.Contains(s, "unmarshal") {
			t.Logf("chromedp: %s", s)
		}
	}))
	b := &browser{ctx: ctx}
	t.Cleanup(func() {
		// Close the browser, then make sure its processes are gone.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = chromedp.Cancel(ctx)
		cancelTab()
		done := make(chan struct{})
		go func() { cancelAlloc(); close(done) }()
		select {
		case <-done:
		case <-cctx.Done():
			t.Errorf("chromium did not exit within 10 s")
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if t.Failed() && len(b.console) > 0 {
			t.Logf("browser console:\n%s", strings.Join(b.console, "\n"))
		}
	})
	chromedp.ListenTarget(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			b.mu.Lock()
			b.dialog = append(b.dialog, ev.Message)
			b.mu.Unlock()
			// A listener must not block the event loop: answer from
			// another goroutine.
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		case *runtime.EventExceptionThrown:
			b.mu.Lock()
			b.errs = append(b.errs, ev.ExceptionDetails.Error())
			b.mu.Unlock()
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, strings.Trim(string(a.Value), `"`))
			}
			b.mu.Lock()
			b.console = append(b.console, string(ev.Type)+": "+strings.Join(parts, " "))
			b.mu.Unlock()
		}
	})
	// Start the browser now, so that a broken install fails here. The
	// first Run binds the browser's life to its context: give it the
	// tab's own and bound the wait from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Run(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start %s: %v", exe, err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("start %s: no browser within 60 s", exe)
	}
	return b
}

// run runs actions with a time limit.
func (b *browser) run(limit time.Duration, actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(b.ctx, limit)
	defer cancel()
	err := chromedp.Run(ctx, actions...)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no result within %s: %w", limit, err)
	}
	return err
}

func (b *browser) click(t *testing.T, sel string) {
	t.Helper()
	if err := b.run(10*time.Second, chromedp.WaitEnabled(sel, chromedp.ByQuery), chromedp.Click(sel, chromedp.ByQuery)); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

func (b *browser) dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialog...)
}

func (b *browser) jsErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// domNode is a server as the topology graph draws it.
type domNode struct {
	State, Role, Writer string
}

const readNodes = `Object.fromEntries([...document.querySelectorAll('svg.graph .node')].map(n =>
	[n.dataset.server, {State: n.dataset.state, Role: n.dataset.role, Writer: n.dataset.writer}]))`

// waitNodes polls the graph until check accepts it.
func (b *browser) waitNodes(t *testing.T, limit time.Duration, what string, check func(map[string]domNode) error) {
	t.Helper()
	Eventually(t, limit, "the page to show "+what, func() error {
		var nodes map[string]domNode
		if err := b.run(5*time.Second, chromedp.Evaluate(readNodes, &nodes)); err != nil {
			return err
		}
		if err := check(nodes); err != nil {
			js, _ := json.Marshal(nodes)
			return fmt.Errorf("%w (page: %s)", err, js)
		}
		return nil
	})
}

// waitJS polls until the expression is true.
func (b *browser) waitJS(t *testing.T, limit time.Duration, what, expr string) {
	t.Helper()
	Eventually(t, limit, what, func() error {
		var ok bool
		if err := b.run(5*time.Second, chromedp.Evaluate(expr, &ok)); err != nil {
			return err
		}
		if !ok {
			return errors.New("not yet")
		}
		return nil
	})
}
