package daemon

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestParseRunDelay: the run-queue delay is schedstat's second field.
func TestParseRunDelay(t *testing.T) {
	for in, want := range map[string]int64{
		"98592206 5529697 341\n": 5529697,
		"1 2 3":                  2,
		"1 2":                    2,
		"1 2\n":                  2,
		"0 0 1\n":                0,
		"":                       0,
		"17":                     0,
		"garbage":                0,
		"1 x 3":                  0,
	} {
		if got := parseRunDelay([]byte(in)); got != want {
			t.Errorf("parseRunDelay(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestRunDelayReadsThisProcess: on Linux the sum over this process's
// threads is read and never goes backwards while threads stay (a thread
// kept busy beside GOMAXPROCS busy goroutines waits for a CPU sooner or
// later; the test only asserts the read works, not that it waited).
func TestRunDelayReadsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc/self/task")
	}
	r := &runDelay{}
	a := r.read()
	stop := time.Now().Add(50 * time.Millisecond)
	done := make(chan struct{})
	for range runtime.GOMAXPROCS(0) + 1 {
		go func() {
			for time.Now().Before(stop) {
			}
			done <- struct{}{}
		}()
	}
	for range runtime.GOMAXPROCS(0) + 1 {
		<-done
	}
	b := r.read()
	if b < 0 || a < 0 {
		t.Fatalf("negative run delay: %s then %s", a, b)
	}
	t.Logf("run-queue delay of this process: %s, then %s", a, b)
}
