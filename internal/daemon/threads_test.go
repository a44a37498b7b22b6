package daemon

import (
	"os"
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

// TestRunDelayReadsThisProcess: the sum over this process's threads is at
// least what the kernel reports for its main thread alone
// (/proc/self/schedstat), read before it.
func TestRunDelayReadsThisProcess(t *testing.T) {
	b, err := os.ReadFile("/proc/self/schedstat")
	if err != nil {
		t.Skip("no /proc/self/schedstat")
	}
	main := time.Duration(parseRunDelay(b))
	t.Logf("main thread %s", main)
	if got := (&runDelay{}).read(); got < main {
		t.Fatalf("run-queue delay of all threads %s, less than the main thread's %s", got, main)
	}
}
