package mtr

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var (
	//go:embed selection.txt
	selectionTxt string
	//go:embed known-differences.txt
	knownTxt string
)

// Selection is the default list of tests (selection.txt).
func Selection() []string { return parseSelection(selectionTxt) }

// ReadSelection reads a list of tests: one per line, "#" starts a
// comment, "main." is added to bare names.
func ReadSelection(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseSelection(string(data)), nil
}

func parseSelection(text string) []string {
	var tests []string
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		for _, name := range strings.Fields(line) {
			if !strings.Contains(name, ".") {
				name = "main." + name
			}
			if !seen[name] {
				seen[name] = true
				tests = append(tests, name)
			}
		}
	}
	return tests
}

// Known lists the tests that may pass direct and fail through Vigil
// because no proxy could do otherwise. A key "main.x" covers every
// topology and protocol; "main.x replication", "main.x ps" or "main.x
// replication ps" narrow it.
type Known map[string]KnownDifference

// KnownDifference excuses a failure through Vigil whose report (mtr's
// report and the diff) contains Contains.
type KnownDifference struct {
	Contains string
	Reason   string
}

// KnownDifferences is the default list (known-differences.txt).
func KnownDifferences() Known { return parseKnown(knownTxt) }

// ReadKnown reads a known-differences file: per line
// "test [topology] [protocol] | text the failure contains | reason",
// "#" starts a comment line.
func ReadKnown(path string) (Known, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKnown(string(data)), nil
}

func parseKnown(text string) Known {
	k := Known{}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
			continue
		}
		parts := strings.SplitN(line, "|", 3)
		f := strings.Fields(parts[0])
		if len(f) == 0 || len(parts) != 3 {
			continue
		}
		if !strings.Contains(f[0], ".") {
			f[0] = "main." + f[0]
		}
		k[strings.Join(f, " ")] = KnownDifference{Contains: strings.TrimSpace(parts[1]), Reason: strings.TrimSpace(parts[2])}
	}
	return k
}

// Reason returns why a test may fail through Vigil in this topology and
// protocol with this failure report, if it is listed.
func (k Known) Reason(test, topology string, proto Protocol, failure string) (string, bool) {
	for _, key := range []string{
		test + " " + topology + " " + string(proto),
		test + " " + topology,
		test + " " + string(proto),
		test,
	} {
		if d, ok := k[key]; ok && strings.Contains(failure, d.Contains) {
			return d.Reason, true
		}
	}
	return "", false
}

// Comparison puts a direct run and a Vigil run of the same tests side by
// side.
type Comparison struct {
	Topology string
	Protocol Protocol
	Direct   *RunResult
	Vigil    *RunResult
	// Regressions pass direct and fail through Vigil, and are not known.
	Regressions []string
	// KnownDiffs pass direct and fail through Vigil for a listed reason.
	KnownDiffs map[string]string
	// BetterThroughVigil fail direct and pass through Vigil (flaky tests,
	// usually).
	BetterThroughVigil []string
	// DifferentFailures fail both ways (for reasons of the environment,
	// usually) but produce different output through Vigil: not counted as
	// regressions, but worth a look; their diffs are in the Vigil run's
	// directory as <test>.direct-vs-vigil.diff.
	DifferentFailures []string
}

// Compare finds the tests that pass direct and fail through Vigil.
func Compare(topology string, direct, vigil *RunResult, known Known) *Comparison {
	c := &Comparison{Topology: topology, Protocol: direct.Options.Protocol, Direct: direct, Vigil: vigil, KnownDiffs: map[string]string{}}
	for _, name := range sortedNames(direct.Tests) {
		d, v := direct.Tests[name], vigil.Tests[name]
		switch {
		case d.Passed() && !v.Passed() && (v == nil || v.Failed()):
			failure := ""
			if v != nil {
				failure = v.Failure
			}
			if reason, ok := known.Reason(name, topology, c.Protocol, failure); ok {
				c.KnownDiffs[name] = reason
			} else {
				c.Regressions = append(c.Regressions, name)
			}
		case d.Failed() && v.Passed():
			c.BetterThroughVigil = append(c.BetterThroughVigil, name)
		case d.Failed() && v.Failed() && d.Output != v.Output:
			c.DifferentFailures = append(c.DifferentFailures, name)
			writeOutputDiff(name, d, v, vigil.Options.OutDir)
		}
	}
	return c
}

// writeOutputDiff writes <test>.direct-vs-vigil.diff in dir: the unified
// diff of a test's normalized output direct and through Vigil.
func writeOutputDiff(name string, d, v *TestResult, dir string) {
	tmp, err := os.MkdirTemp("", "mtr-diff-")
	if err != nil {
		return
	}
	defer os.RemoveAll(tmp)
	a, b := filepath.Join(tmp, "direct"), filepath.Join(tmp, "vigil")
	if os.WriteFile(a, []byte(d.Output+"\n"), 0o644) != nil || os.WriteFile(b, []byte(v.Output+"\n"), 0o644) != nil {
		return
	}
	out, _ := exec.Command("diff", "-u", "--label", name+" direct", "--label", name+" through Vigil", a, b).Output()
	_ = os.WriteFile(filepath.Join(dir, strings.TrimPrefix(name, "main.")+".direct-vs-vigil.diff"), out, 0o644)
}

// Title is "standalone, text protocol".
func (c *Comparison) Title() string {
	return fmt.Sprintf("%s, %s protocol", c.Topology, c.Protocol)
}

// WriteTable writes the comparison as Markdown: the counts, the tests
// whose outcome differs, and for each regression the head of its diff.
func (c *Comparison) WriteTable(w io.Writer, diffLines int) {
	fmt.Fprintf(w, "## %s\n\n", c.Title())
	fmt.Fprintf(w, "| run | result | time |\n|---|---|---|\n")
	fmt.Fprintf(w, "| direct (%s) | %s | %s |\n", c.Direct.Options.Addr, c.Direct.Summary(), c.Direct.Elapsed.Round(100*time.Millisecond))
	fmt.Fprintf(w, "| through Vigil (%s) | %s | %s |\n\n", c.Vigil.Options.Addr, c.Vigil.Summary(), c.Vigil.Elapsed.Round(100*time.Millisecond))
	fmt.Fprintf(w, "| test | direct | through Vigil | note |\n|---|---|---|---|\n")
	for _, name := range sortedNames(c.Direct.Tests) {
		d, v := c.Direct.Tests[name], c.Vigil.Tests[name]
		note := ""
		switch {
		case contains(c.Regressions, name):
			note = "**REGRESSION**"
		case c.KnownDiffs[name] != "":
			note = "known: " + c.KnownDiffs[name]
		case contains(c.BetterThroughVigil, name):
			note = "fails direct only"
		case contains(c.DifferentFailures, name):
			note = "fails both ways, output differs"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, status(d), status(v), note)
	}
	fmt.Fprintln(w)
	if len(c.DifferentFailures) > 0 {
		fmt.Fprintf(w, "Fail both ways, with different output through Vigil (not counted; `<test>.direct-vs-vigil.diff` in %s): %s\n\n", c.Vigil.Options.OutDir, strings.Join(c.DifferentFailures, ", "))
	}
	if len(c.Regressions) == 0 {
		fmt.Fprintf(w, "Every test that passes direct passes through Vigil.\n\n")
		return
	}
	fmt.Fprintf(w, "### Pass direct, fail through Vigil (%d)\n\n", len(c.Regressions))
	for _, name := range c.Regressions {
		v := c.Vigil.Tests[name]
		fmt.Fprintf(w, "#### %s\n\n", name)
		if v != nil && v.DiffFile != "" {
			fmt.Fprintf(w, "Full diff: `%s`\n\n", v.DiffFile)
		}
		if v != nil {
			fmt.Fprintf(w, "```\n%s\n```\n\n", headLines(v.Failure, diffLines))
		}
	}
}

func status(r *TestResult) string {
	if r == nil {
		return "missing"
	}
	if r.Passed() {
		return fmt.Sprintf("pass (%d ms)", r.Millis)
	}
	if r.Comment != "" {
		return r.Status + ": " + r.Comment
	}
	return r.Status
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// headLines is the first n lines of s, with a note of how many were cut.
func headLines(s string, n int) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	total := 0
	for sc.Scan() {
		total++
		if total <= n {
			out = append(out, sc.Text())
		}
	}
	if total > n {
		out = append(out, fmt.Sprintf("... (%d more lines)", total-n))
	}
	return strings.Join(out, "\n")
}
