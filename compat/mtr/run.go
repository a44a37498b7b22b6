package mtr

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Protocol is how mysqltest sends statements.
type Protocol string

const (
	// Text sends every statement with COM_QUERY.
	Text Protocol = "text"
	// PS runs every statement it can as a server-side prepared statement
	// (mysqltest --ps-protocol: COM_STMT_PREPARE, EXECUTE, CLOSE).
	PS Protocol = "ps"
)

// RunOptions is one mariadb-test-run invocation.
type RunOptions struct {
	// Label names the run ("direct", "vigil") in reports and directories.
	Label string
	// Addr is host:port the tests connect to (as root, empty password).
	Addr     string
	Protocol Protocol
	// Tests are names like main.ps.
	Tests []string
	// WorkDir holds the run's throwaway files (the vardir, a shadow of the
	// suite for .reject files); the server must be able to write in its
	// tmp/, so it and its parents must be traversable by user mysql.
	WorkDir string
	// OutDir receives the artifacts: mtr.log, results.tsv and a .diff per
	// failed test.
	OutDir string
	// TestTimeout bounds each test (the wrapper kills mariadb-test after
	// it; mariadb-test-run's own --testcase-timeout, in whole minutes, is
	// set a minute above); 0 means DefaultTestTimeout.
	TestTimeout time.Duration
}

// TestResult is what mariadb-test-run said of one test.
type TestResult struct {
	Name string
	// Status is pass, fail, skipped or disabled ("missing" when mtr did
	// not report the test at all).
	Status string
	// Millis is the test's run time as mtr measured it (pass only).
	Millis int
	// Comment is mtr's reason for a skip.
	Comment string
	// Failure is mtr's report of a failure: the mysqltest error or the
	// diff of the result file against the output.
	Failure string
	// DiffFile is the artifact with Failure and, when mysqltest wrote one,
	// the unified diff of the .result against the .reject.
	DiffFile string
	// Output is what the failed test produced, to compare runs: the
	// .reject (the output up to the failure) and mysqltest's error, with
	// the run's own paths and times taken out.
	Output string
}

// Passed reports whether the test passed.
func (r *TestResult) Passed() bool { return r != nil && r.Status == "pass" }

// Failed reports whether the test failed (a test mtr never reported
// counts as failed).
func (r *TestResult) Failed() bool { return r != nil && (r.Status == "fail" || r.Status == "missing") }

// RunResult is one mariadb-test-run invocation's outcome.
type RunResult struct {
	Options RunOptions
	// Command is the mariadb-test-run command line as run, from the
	// suite directory (environment first).
	Command string
	Tests   map[string]*TestResult
	Elapsed time.Duration
}

// Counts returns how many tests passed, failed and were skipped.
func (r *RunResult) Counts() (passed, failed, skipped int) {
	for _, t := range r.Tests {
		switch {
		case t.Passed():
			passed++
		case t.Failed():
			failed++
		default:
			skipped++
		}
	}
	return
}

// Summary is "N passed, M failed" (and skips, when any).
func (r *RunResult) Summary() string {
	p, f, s := r.Counts()
	out := fmt.Sprintf("%d passed, %d failed", p, f)
	if s > 0 {
		out += fmt.Sprintf(", %d skipped", s)
	}
	return out
}

// DefaultTestTimeout bounds a test: the slowest of the selection takes
// about 9 s direct on this 2-core machine when others load it (26 s was
// seen at a load average of 77), and each test that hangs through Vigil
// costs this much of the run.
const DefaultTestTimeout = 40 * time.Second

// Run runs mariadb-test-run --extern once against t's servers at
// opts.Addr. The wrapper resets t before every test. An error means the
// run itself could not be done; failing tests are in the result.
func (t *Target) Run(ctx context.Context, opts RunOptions) (*RunResult, error) {
	if opts.TestTimeout == 0 {
		opts.TestTimeout = DefaultTestTimeout
	}
	host, port, ok := strings.Cut(opts.Addr, ":")
	if !ok {
		return nil, fmt.Errorf("address %q is not host:port", opts.Addr)
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(opts.WorkDir); err != nil {
		return nil, err
	}
	suite, err := shadowSuite(t.MTRDir, filepath.Join(opts.WorkDir, "root"))
	if err != nil {
		return nil, fmt.Errorf("shadow of %s: %w", t.MTRDir, err)
	}
	vardir := filepath.Join(opts.WorkDir, "var")
	for _, d := range []string{filepath.Join(vardir, "log"), filepath.Join(vardir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	// The server writes SELECT ... INTO OUTFILE there, as user mysql.
	if err := os.Chmod(filepath.Join(vardir, "tmp"), 0o1777); err != nil {
		return nil, err
	}
	if err := traversable(opts.WorkDir); err != nil {
		return nil, err
	}
	wrapper := filepath.Join(opts.WorkDir, "mysqltest-wrapper.sh")
	files := map[string]string{wrapper: wrapperScript, filepath.Join(opts.WorkDir, "reset.sql"): resetSQL}
	install, err := MTRProcedures(t.MTRDir)
	if err != nil {
		return nil, err
	}
	files[filepath.Join(opts.WorkDir, "mtr-procedures.sql")] = string(install)
	for p, content := range files {
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			return nil, err
		}
	}
	mysqltest, err := exec.LookPath("mariadb-test")
	if err != nil {
		return nil, err
	}
	var replicaCnfs []string
	for _, r := range t.Replicas {
		replicaCnfs = append(replicaCnfs, r.Config)
	}
	env := []string{
		"MYSQL_TEST=" + wrapper,
		"VIGIL_MTR_MYSQLTEST=" + mysqltest,
		"VIGIL_MTR_PRIMARY_CNF=" + t.Primary.Config,
		"VIGIL_MTR_REPLICA_CNFS=" + strings.Join(replicaCnfs, " "),
		"VIGIL_MTR_RESET_SQL=" + filepath.Join(opts.WorkDir, "reset.sql"),
		"VIGIL_MTR_INSTALL_SQL=" + filepath.Join(opts.WorkDir, "mtr-procedures.sql"),
		"VIGIL_MTR_RESET_LOG=" + filepath.Join(opts.OutDir, "reset.log"),
		"VIGIL_MTR_TEST_TIMEOUT=" + strconv.Itoa(int(opts.TestTimeout.Seconds())),
	}
	args := Command(host, port, vardir, opts.Protocol, opts.TestTimeout)
	args = append(args, opts.Tests...)

	logPath := filepath.Join(opts.OutDir, "mtr.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command("perl", args...)
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, killed as a whole on cancel; and killed if
	// this process dies without cancelling (a test binary's SIGINT).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	res := &RunResult{
		Options: opts,
		Command: strings.Join(env, " ") + " perl " + strings.Join(args, " "),
		Tests:   map[string]*TestResult{},
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = ctx.Err()
	}
	res.Elapsed = time.Since(t0)
	_ = logf.Sync()
	out, rerr := os.ReadFile(logPath)
	if rerr != nil {
		return nil, rerr
	}
	parseMTR(out, res.Tests)
	for _, name := range opts.Tests {
		if res.Tests[name] == nil {
			res.Tests[name] = &TestResult{Name: name, Status: "missing", Failure: "mariadb-test-run did not report this test (see mtr.log)"}
		}
	}
	if err := writeDiffs(res, filepath.Join(suite, "main")); err != nil {
		return res, err
	}
	if err := writeResults(res); err != nil {
		return res, err
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return res, fmt.Errorf("mariadb-test-run: %w", err)
	}
	// mtr exits 1 when a test failed; with no result at all it failed to run.
	if len(opts.Tests) > 0 && allMissing(res) {
		return res, fmt.Errorf("mariadb-test-run reported no test; its output is in %s", logPath)
	}
	return res, nil
}

// Command is the mariadb-test-run argument list (from the suite
// directory, after "perl") for the extern server at host:port.
//
//   - --extern makes mtr start no server: these options go to the
//     [client] group of the my.cnf it writes for mysqltest and the client
//     programs that tests run. protocol=tcp makes "localhost" in a test's
//     connect() mean TCP to host:port rather than a unix socket, and
//     loose-default-character-set=latin1 gives the mariadb client mtr's
//     default character set (mysqltest has no such option, hence loose-).
//   - --force --max-test-fail=0 runs every test whatever fails.
//   - --testcase-timeout (minutes) is a backstop: the wrapper kills a
//     test after timeout already.
func Command(host, port, vardir string, proto Protocol, timeout time.Duration) []string {
	minutes := int((timeout+time.Minute-1)/time.Minute) + 1
	args := []string{
		"./mariadb-test-run.pl",
		"--extern", "host=" + host,
		"--extern", "port=" + port,
		"--extern", "user=root",
		"--extern", "protocol=tcp",
		"--extern", "loose-default-character-set=latin1",
		"--vardir=" + vardir,
		"--force", "--max-test-fail=0",
		"--testcase-timeout=" + strconv.Itoa(minutes),
	}
	if proto == PS {
		args = append(args, "--ps-protocol")
	}
	return args
}

func allMissing(res *RunResult) bool {
	for _, t := range res.Tests {
		if t.Status != "missing" {
			return false
		}
	}
	return true
}

// mtrLine is a test's result line: "main.ps   [ pass ]   123", with an
// optional worker prefix and combination.
var mtrLine = regexp.MustCompile(`^(?:worker\[\d+\]\s+)?([\w-]+\.[\w-]+)(?:\s+'[^']*')?\s+(?:w\d+\s+)?\[ (pass|fail|skipped|disabled) \]\s*(.*)$`)

// parseMTR reads mariadb-test-run's output: the result line of each test
// and, after a failure, the report up to " - saving" or " - skipping".
func parseMTR(out []byte, tests map[string]*TestResult) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var cur *TestResult
	var fail strings.Builder
	flush := func() {
		if cur != nil {
			cur.Failure = strings.TrimSpace(fail.String())
		}
		cur = nil
		fail.Reset()
	}
	for sc.Scan() {
		line := sc.Text()
		if m := mtrLine.FindStringSubmatch(line); m != nil {
			flush()
			r := &TestResult{Name: m[1], Status: m[2]}
			rest := strings.TrimSpace(m[3])
			switch r.Status {
			case "pass":
				r.Millis, _ = strconv.Atoi(strings.Fields(rest + " 0")[0])
			case "fail":
				cur = r
			default:
				r.Comment = rest
			}
			// A retried test reports again; the last word stands.
			tests[r.Name] = r
			continue
		}
		if cur == nil {
			continue
		}
		if strings.HasPrefix(line, " - saving ") || strings.HasPrefix(line, " - skipping ") {
			flush()
			continue
		}
		fail.WriteString(line)
		fail.WriteByte('\n')
	}
	flush()
}

// writeDiffs writes OutDir/<test>.diff for every failed test: mtr's report
// and the unified diff of the .result against mysqltest's .reject, which
// mysqltest writes next to the result file (in the shadow suite).
func writeDiffs(res *RunResult, mainDir string) error {
	for _, name := range sortedNames(res.Tests) {
		r := res.Tests[name]
		if !r.Failed() {
			continue
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, "# %s, %s protocol, %s (%s)\n", name, res.Options.Protocol, res.Options.Label, res.Options.Addr)
		fmt.Fprintf(&b, "# mariadb-test-run's report:\n%s\n", r.Failure)
		short := strings.TrimPrefix(name, "main.")
		reject := filepath.Join(mainDir, short+".reject")
		r.Output = normalize(errorLines(r.Failure), res.Options.WorkDir)
		if data, err := os.ReadFile(reject); err == nil {
			r.Output = normalize(string(data), res.Options.WorkDir) + "\n" + r.Output
		}
		if _, err := os.Stat(reject); err == nil {
			result := filepath.Join(mainDir, short+".result")
			d, _ := exec.Command("diff", "-u", "--label", short+".result", "--label", short+".reject", result, reject).Output()
			fmt.Fprintf(&b, "\n# diff -u %s.result %s.reject (the whole output, up to any error):\n%s", short, short, d)
			if data, err := os.ReadFile(reject); err == nil {
				_ = os.WriteFile(filepath.Join(res.Options.OutDir, short+".reject"), data, 0o644)
			}
		}
		r.DiffFile = filepath.Join(res.Options.OutDir, short+".diff")
		if err := os.WriteFile(r.DiffFile, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// errorLines keeps mysqltest's error from mtr's report of a failure
// ("mysqltest: At line N: ..." and what follows on that line), if any.
func errorLines(failure string) string {
	var out []string
	for _, line := range strings.Split(failure, "\n") {
		if strings.HasPrefix(line, "mysqltest: ") || strings.HasPrefix(line, "At line ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// normalize takes out of a test's output what differs between runs by
// construction: the run's work directory.
func normalize(s, workDir string) string {
	if workDir != "" {
		s = strings.ReplaceAll(s, workDir, "<workdir>")
	}
	return s
}

// writeResults writes OutDir/results.tsv: test, status, milliseconds,
// comment.
func writeResults(res *RunResult) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s: %s (%s protocol, %s) in %s\n# %s\n", res.Options.Label, res.Summary(), res.Options.Protocol, res.Options.Addr, res.Elapsed.Round(time.Millisecond), res.Command)
	for _, name := range sortedNames(res.Tests) {
		r := res.Tests[name]
		fmt.Fprintf(&b, "%s\t%s\t%d\t%s\n", name, r.Status, r.Millis, r.Comment)
	}
	return os.WriteFile(filepath.Join(res.Options.OutDir, "results.tsv"), b.Bytes(), 0o644)
}

func sortedNames(m map[string]*TestResult) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// shadowSuite builds, under root, a tree that mirrors the installed
// suite's with symbolic links, except that the main suite's directory is
// a real one (its files are links): mysqltest writes a test's .reject next
// to its .result, and runs must not share (or write into) the installed
// directory. mariadb-test-run finds its binaries from the suite's
// location (two levels up: /usr/share/mysql/mysql-test → /usr), so the
// levels above are mirrored too. It returns the shadow suite directory.
func shadowSuite(mtrDir, root string) (string, error) {
	mtrDir, err := filepath.Abs(mtrDir)
	if err != nil {
		return "", err
	}
	// /usr/share/mysql/mysql-test: mirror /usr, /usr/share, /usr/share/mysql.
	levels := []string{filepath.Dir(filepath.Dir(filepath.Dir(mtrDir))), filepath.Dir(filepath.Dir(mtrDir)), filepath.Dir(mtrDir), mtrDir}
	dst := root
	for i, src := range levels {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return "", err
		}
		skip := "main"
		if i+1 < len(levels) {
			skip = filepath.Base(levels[i+1])
		}
		if err := linkEntries(src, dst, skip); err != nil {
			return "", err
		}
		dst = filepath.Join(dst, skip)
	}
	// dst is now root/.../mysql-test/main.
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	if err := linkEntries(filepath.Join(mtrDir, "main"), dst, ""); err != nil {
		return "", err
	}
	return filepath.Dir(dst), nil
}

func linkEntries(src, dst, skip string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == skip {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// traversable gives "others" execute permission on dir and every parent
// that lacks it, so that the server (user mysql) reaches vardir/tmp.
func traversable(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
