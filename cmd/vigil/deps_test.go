package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// plottingPackage matches the import paths the daemon must not link:
// gonum's plotting and what it pulls in (fonts, LaTeX, PDF). They belong
// to vigil-bench; the process that holds every client's session carries
// only what it runs (issue 26).
var plottingPackage = regexp.MustCompile(`gonum|font|latex|pdf`)

func TestDaemonLinksNoPlotting(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if goBin, err = exec.LookPath("/usr/local/go/bin/go"); err != nil {
			t.Skip("no go tool to list the daemon's dependencies")
		}
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/vigil: %v", err)
	}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if plottingPackage.MatchString(pkg) {
			bad = append(bad, pkg)
		}
	}
	if len(bad) > 0 {
		t.Errorf("cmd/vigil links %d plotting, font or PDF packages (they belong in vigil-bench):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// `vigil bench` points at vigil-bench instead of vanishing.
func TestBenchMoved(t *testing.T) {
	if code := realMain([]string{"bench", "--quick"}); code != 2 {
		t.Errorf("vigil bench --quick: exit %d, want 2", code)
	}
}
