package failover

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/scenarios/*.txt with the decisions the engine makes now")

const decisionMark = "--- decision\n"

// TestScenarios runs the golden scenario files: each holds an input in
// the scenario language (see input_test.go) and, after "--- decision",
// the rendered decision. go test -run TestScenarios -update rewrites the
// expected part after a deliberate change of behaviour.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("only %d scenario files", len(files))
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			input, want, _ := strings.Cut(string(b), decisionMark)
			in, err := parseInput(input)
			if err != nil {
				t.Fatal(err)
			}
			got := Decide(in).String()
			if *update {
				if err := os.WriteFile(file, []byte(input+decisionMark+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("decision differs from %s (run with -update after a deliberate change)\n--- got\n%s--- want\n%s", file, got, want)
			}
		})
	}
}
