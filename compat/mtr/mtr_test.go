package mtr

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mtrOutput = `Logging: ./mariadb-test-run.pl --extern host=127.0.0.1
==============================================================================

TEST                                      RESULT   TIME (ms) or COMMENT
--------------------------------------------------------------------------

worker[01] Using MTR_BUILD_THREAD 300, with reserved ports 19000..19029
main.ps_2myisam                          [ pass ]    221
main.kill                                [ fail ]
        Test ended at 2026-11-24 04:02:21

mysqltest: At line 47: query 'kill query $ID' failed: ER_NO_SUCH_THREAD (1094): Unknown thread id: 572

The result from queries just before the failure was:
kill query ID;
 - saving '/tmp/x/var/log/main.kill/' to '/tmp/x/var/log/main.kill/'
main.commit_1innodb                      [ fail ]  timeout after 180 seconds
        Test ended at 2026-11-24 04:23:02

Test case timeout after 180 seconds
 - skipping '/tmp/x/var/log/main.commit_1innodb/'
main.transaction_timeout                 [ skipped ]  Test requires: ps-protocol/sp-protocol/cursor-protocol/view-protocol disabled
main.xa                                  [ pass ]   7209
--------------------------------------------------------------------------
`

func TestParseMTR(t *testing.T) {
	tests := map[string]*TestResult{}
	parseMTR([]byte(mtrOutput), tests)
	want := map[string]string{
		"main.ps_2myisam": "pass", "main.kill": "fail", "main.commit_1innodb": "fail",
		"main.transaction_timeout": "skipped", "main.xa": "pass",
	}
	if len(tests) != len(want) {
		t.Fatalf("parsed %d tests, want %d: %v", len(tests), len(want), tests)
	}
	for name, st := range want {
		if r := tests[name]; r == nil || r.Status != st {
			t.Errorf("%s: %+v, want %s", name, r, st)
		}
	}
	if tests["main.xa"].Millis != 7209 {
		t.Errorf("xa took %d ms", tests["main.xa"].Millis)
	}
	if f := tests["main.kill"].Failure; !strings.Contains(f, "Unknown thread id: 572") || strings.Contains(f, "saving") {
		t.Errorf("kill's failure: %q", f)
	}
	if f := tests["main.commit_1innodb"].Failure; !strings.Contains(f, "Test case timeout") {
		t.Errorf("commit_1innodb's failure: %q", f)
	}
	if c := tests["main.transaction_timeout"].Comment; !strings.HasPrefix(c, "Test requires") {
		t.Errorf("skip comment %q", c)
	}
}

func TestSelectionAndKnown(t *testing.T) {
	sel := Selection()
	if len(sel) < 40 || len(sel) > 80 {
		t.Errorf("selection has %d tests, want 40 to 80", len(sel))
	}
	seen := map[string]bool{}
	for _, name := range sel {
		if !strings.HasPrefix(name, "main.") || seen[name] {
			t.Errorf("selection entry %q (duplicate or not main.)", name)
		}
		seen[name] = true
		if _, err := os.Stat(filepath.Join(DefaultMTRDir, "main", strings.TrimPrefix(name, "main.")+".test")); err != nil && Available("") == nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for key := range KnownDifferences() {
		if !seen[strings.Fields(key)[0]] {
			t.Errorf("known difference %q is not in the selection", key)
		}
	}
	k := parseKnown("# comment\nxa | sessions | monitor\nmain.lock replication ps | wait | counts\n")
	if r, ok := k.Reason("main.xa", "standalone", Text, "... sessions ..."); !ok || r != "monitor" {
		t.Errorf("xa: %q %v", r, ok)
	}
	if _, ok := k.Reason("main.xa", "standalone", Text, "another failure"); ok {
		t.Error("xa excused for a failure that does not match")
	}
	if _, ok := k.Reason("main.lock", "replication", Text, "wait"); ok {
		t.Error("lock excused in the text protocol")
	}
	if _, ok := k.Reason("main.lock", "replication", PS, "wait"); !ok {
		t.Error("lock not excused in replication ps")
	}
	for _, u := range Users() {
		if u.Name == "" {
			t.Error("a user without a name")
		}
	}
}

func TestCompare(t *testing.T) {
	run := func(label string, st map[string]string) *RunResult {
		r := &RunResult{Options: RunOptions{Label: label, Protocol: Text, OutDir: t.TempDir()}, Tests: map[string]*TestResult{}}
		for name, s := range st {
			r.Tests[name] = &TestResult{Name: name, Status: s, Failure: name + " failed", Output: label}
		}
		return r
	}
	d := run("direct", map[string]string{"main.a": "pass", "main.b": "pass", "main.c": "fail", "main.d": "fail", "main.e": "pass"})
	v := run("vigil", map[string]string{"main.a": "pass", "main.b": "fail", "main.c": "pass", "main.d": "fail", "main.e": "fail"})
	c := Compare("standalone", d, v, Known{"main.e": {Contains: "main.e", Reason: "inherent"}})
	if strings.Join(c.Regressions, ",") != "main.b" {
		t.Errorf("regressions %v", c.Regressions)
	}
	if c.KnownDiffs["main.e"] != "inherent" {
		t.Errorf("known %v", c.KnownDiffs)
	}
	if strings.Join(c.BetterThroughVigil, ",") != "main.c" || strings.Join(c.DifferentFailures, ",") != "main.d" {
		t.Errorf("better %v, different %v", c.BetterThroughVigil, c.DifferentFailures)
	}
	var b strings.Builder
	c.WriteTable(&b, 5)
	if !strings.Contains(b.String(), "| main.b | pass (0 ms) | fail | **REGRESSION** |") || !strings.Contains(b.String(), "3 passed, 2 failed") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestMTRProcedures(t *testing.T) {
	if err := Available(""); err != nil {
		t.Skip(err)
	}
	sql, err := MTRProcedures(DefaultMTRDir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(sql)
	if strings.Contains(s, "delimiter ||;") || !strings.Contains(s, "delimiter ||\n") || !strings.Contains(s, "add_suppression") {
		t.Errorf("mtr procedures not rewritten for the client:\n%.300s", s)
	}
}
