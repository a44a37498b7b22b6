package bench

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The testdata files are real output of sysbench 1.0.20 against MariaDB
// 10.11: complete runs, a run with deadlocks it retried, and runs that
// died (no server, a missing table, a connection killed mid-run).
func TestParseSysbench(t *testing.T) {
	tests := []struct {
		file string
		want SysbenchResult
	}{
		{"sysbench-1.0.20-point_select.txt", SysbenchResult{
			Queries: 155912, QPS: 31109.49, Transactions: 155912, TPS: 31109.49,
			TotalTime: 5.0103, AvgMs: 1.03, MaxMs: 176.99, Percentile: 95, PercentileMs: 2.76, Complete: true,
		}},
		{"sysbench-1.0.20-read_only_skip_trx.txt", SysbenchResult{
			Queries: 144340, QPS: 28721.00, Transactions: 10310, TPS: 2051.50,
			TotalTime: 5.0243, AvgMs: 15.52, MaxMs: 93.04, Percentile: 95, PercentileMs: 25.28, Complete: true,
		}},
		{"sysbench-1.0.20-read_write_deadlocks.txt", SysbenchResult{
			Queries: 51417, QPS: 12688.15, Transactions: 1322, TPS: 326.23, IgnoredErrors: 1535,
			TotalTime: 4.0510, AvgMs: 97.40, MaxMs: 548.97, Percentile: 95, PercentileMs: 235.74, Complete: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := ParseSysbench(readTestdata(t, tt.file))
			if got.Fatal != nil {
				t.Errorf("fatal lines %q", got.Fatal)
			}
			got.Fatal = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if got.Failed() {
				t.Error("a complete run reports Failed")
			}
		})
	}
}

func TestParseSysbenchFatal(t *testing.T) {
	tests := []struct {
		file      string
		fatal     int
		firstHas  string
		complete  bool
		errorsMin int64
	}{
		{"sysbench-1.0.20-fatal_connect.txt", 7, "unable to connect to MySQL server", false, 7},
		{"sysbench-1.0.20-fatal_no_table.txt", 13, "mysql_stmt_prepare() failed", false, 13},
		{"sysbench-1.0.20-fatal_lost_connection.txt", 2, "error 2013 (Lost connection", false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := ParseSysbench(readTestdata(t, tt.file))
			if len(got.Fatal) != tt.fatal {
				t.Fatalf("%d FATAL lines, want %d: %q", len(got.Fatal), tt.fatal, got.Fatal)
			}
			if !strings.Contains(got.Fatal[0], tt.firstHas) {
				t.Errorf("first FATAL %q does not contain %q", got.Fatal[0], tt.firstHas)
			}
			if got.Complete != tt.complete || !got.Failed() {
				t.Errorf("complete %v failed %v", got.Complete, got.Failed())
			}
			if got.Errors() != tt.errorsMin {
				t.Errorf("errors %d, want %d", got.Errors(), tt.errorsMin)
			}
			if got.QPS != 0 || got.Queries != 0 {
				t.Errorf("a dead run has qps %v queries %d", got.QPS, got.Queries)
			}
		})
	}
}

// With --histogram=on sysbench prints every latency bucket; the
// percentiles computed from it must match the one sysbench computed
// itself (95th: 0.28 ms in this run of 60440 events).
func TestParseSysbenchHistogram(t *testing.T) {
	got := ParseSysbench(readTestdata(t, "sysbench-1.0.20-point_select_histogram.txt"))
	if !got.Complete || got.Queries != 60440 || got.PercentileMs != 0.28 {
		t.Fatalf("statistics: %+v", got)
	}
	// sysbench prints its percentile rounded to hundredths.
	if math.Abs(got.P95Ms-0.28) > 0.0051 || got.P95() != got.P95Ms {
		t.Errorf("p95 from the histogram %v, sysbench says 0.28", got.P95Ms)
	}
	if !(got.P50Ms > 0 && got.P50Ms < got.P95Ms && got.P95Ms < got.P99Ms && got.P99Ms <= got.MaxMs) {
		t.Errorf("p50 %v p95 %v p99 %v max %v are not in order", got.P50Ms, got.P95Ms, got.P99Ms, got.MaxMs)
	}
}

func TestHistogramPercentile(t *testing.T) {
	b := []Bucket{{1, 50}, {2, 40}, {5, 9}, {30, 1}}
	for _, tt := range []struct{ p, want float64 }{{50, 1}, {50.1, 2}, {90, 2}, {95, 5}, {99, 5}, {99.5, 30}, {100, 30}, {0, 1}} {
		if got := HistogramPercentile(b, tt.p); got != tt.want {
			t.Errorf("p%v = %v, want %v", tt.p, got, tt.want)
		}
	}
	if HistogramPercentile(nil, 50) != 0 {
		t.Error("percentile of nothing")
	}
	// Without a histogram (results of schema 1) P95 falls back on
	// sysbench's own percentile.
	if r := (SysbenchResult{Percentile: 95, PercentileMs: 3.5}); r.P95() != 3.5 {
		t.Errorf("P95 fallback %v", r.P95())
	}
}

func TestParseSysbenchEmpty(t *testing.T) {
	got := ParseSysbench("")
	if !got.Failed() || got.Complete {
		t.Errorf("empty output: %+v", got)
	}
}

func TestRunArgs(t *testing.T) {
	sc, err := ParseScenarios("read_only")
	if err != nil {
		t.Fatal(err)
	}
	c := SysbenchConn{Host: "127.0.0.1", Port: 3307, User: "app", Password: "app", DB: "sbtest", Tables: 4, TableSize: 20000}
	got := strings.Join(RunArgs(sc[0], c, 32, 8), " ")
	want := "oltp_read_only --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=3307 --mysql-user=app --mysql-password=app " +
		"--mysql-db=sbtest --tables=4 --table-size=20000 --skip_trx=on --threads=32 --time=8 --report-interval=0 " +
		"--histogram=on --percentile=95 run"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
