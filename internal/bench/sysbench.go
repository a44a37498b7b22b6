package bench

import (
	"bufio"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// SysbenchResult is what one `sysbench ... run` printed (sysbench 1.0.20).
// A run that died before its statistics has zero counts and its FATAL lines.
type SysbenchResult struct {
	Queries       int64   `json:"queries"`
	QPS           float64 `json:"qps"`
	Transactions  int64   `json:"transactions"`
	TPS           float64 `json:"tps"`
	IgnoredErrors int64   `json:"ignored_errors"`
	Reconnects    int64   `json:"reconnects"`
	// TotalTime is sysbench's own "total time" in seconds.
	TotalTime float64 `json:"total_time_s"`
	AvgMs     float64 `json:"latency_avg_ms"`
	MaxMs     float64 `json:"latency_max_ms"`
	// Percentile is the latency percentile sysbench was asked for
	// (--percentile) and PercentileMs its value.
	Percentile   int     `json:"percentile"`
	PercentileMs float64 `json:"latency_percentile_ms"`
	// P50Ms, P95Ms and P99Ms come from sysbench's latency histogram
	// (--histogram=on) of events, or from the Go load generator's
	// samples; 0 when there was none.
	P50Ms float64  `json:"latency_p50_ms"`
	P95Ms float64  `json:"latency_p95_ms"`
	P99Ms float64  `json:"latency_p99_ms"`
	Fatal []string `json:"fatal,omitempty"`
	// FirstError is the first error the Go load generator saw (its
	// errors are counted in IgnoredErrors).
	FirstError string `json:"first_error,omitempty"`
	// Complete is true when the statistics were printed.
	Complete bool `json:"complete"`
}

// P95 is the 95th percentile from the histogram, or sysbench's own when
// it printed no histogram (runs of schema 1).
func (r SysbenchResult) P95() float64 {
	if r.P95Ms == 0 && r.Percentile == 95 {
		return r.PercentileMs
	}
	return r.P95Ms
}

// Failed reports a run that aborted: FATAL lines or no statistics.
func (r SysbenchResult) Failed() bool { return len(r.Fatal) > 0 || !r.Complete }

// Errors counts what went wrong in a run: errors sysbench ignored and
// retried (deadlocks, for instance) plus its FATAL lines.
func (r SysbenchResult) Errors() int64 { return r.IgnoredErrors + int64(len(r.Fatal)) }

var (
	// "    queries:     155912 (31109.49 per sec.)": no space before the
	// parenthesis when the count fills its column.
	reCountRate  = regexp.MustCompile(`^\s*(transactions|queries|ignored errors|reconnects):\s+(\d+)\s*\(([\d.]+) per sec\.\)`)
	reTotalTime  = regexp.MustCompile(`^\s*total time:\s+([\d.]+)s`)
	reLatency    = regexp.MustCompile(`^\s*(min|avg|max|sum):\s+([\d.]+)\s*$`)
	rePercentile = regexp.MustCompile(`^\s*(\d+)th percentile:\s+([\d.]+)\s*$`)
	// "       0.069 |**************************               7784"
	reHistogram = regexp.MustCompile(`^\s*([\d.]+) \|[* ]*?\s(\d+)\s*$`)
)

// Bucket is one line of sysbench's latency histogram: a latency in
// milliseconds and how many events took about that long.
type Bucket struct {
	Ms    float64
	Count int64
}

// HistogramPercentile is the latency under which p percent of the events
// fall, the way sysbench computes its own --percentile: the first bucket
// whose running count reaches ceil(total × p / 100). Buckets must be in
// increasing order of latency, as sysbench prints them; 0 for none.
func HistogramPercentile(buckets []Bucket, p float64) float64 {
	var total int64
	for _, b := range buckets {
		total += b.Count
	}
	if total == 0 {
		return 0
	}
	want := int64(math.Ceil(float64(total) * p / 100))
	want = max(want, 1)
	var run int64
	for _, b := range buckets {
		run += b.Count
		if run >= want {
			return b.Ms
		}
	}
	return buckets[len(buckets)-1].Ms
}

// ParseSysbench reads the output of a sysbench 1.0.20 OLTP run.
func ParseSysbench(out string) SysbenchResult {
	var r SysbenchResult
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	inLatency, inHistogram := false, false
	var hist []Bucket
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "FATAL:") {
			r.Fatal = append(r.Fatal, strings.TrimSpace(strings.TrimPrefix(line, "FATAL:")))
			continue
		}
		if strings.HasPrefix(line, "Latency (ms):") {
			inLatency = true
			continue
		}
		if strings.HasPrefix(line, "Latency histogram") {
			inHistogram = true
			continue
		}
		if inHistogram {
			if m := reHistogram.FindStringSubmatch(line); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				n, _ := strconv.ParseInt(m[2], 10, 64)
				hist = append(hist, Bucket{Ms: v, Count: n})
				continue
			}
			if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "SQL statistics") {
				inHistogram = false
			}
		}
		if line != "" && line[0] != ' ' {
			inLatency = false
		}
		if m := reCountRate.FindStringSubmatch(line); m != nil {
			n, _ := strconv.ParseInt(m[2], 10, 64)
			rate, _ := strconv.ParseFloat(m[3], 64)
			switch m[1] {
			case "transactions":
				r.Transactions, r.TPS = n, rate
			case "queries":
				r.Queries, r.QPS = n, rate
				r.Complete = true
			case "ignored errors":
				r.IgnoredErrors = n
			case "reconnects":
				r.Reconnects = n
			}
			continue
		}
		if m := reTotalTime.FindStringSubmatch(line); m != nil {
			r.TotalTime, _ = strconv.ParseFloat(m[1], 64)
			continue
		}
		if !inLatency {
			continue
		}
		if m := reLatency.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			switch m[1] {
			case "avg":
				r.AvgMs = v
			case "max":
				r.MaxMs = v
			}
			continue
		}
		if m := rePercentile.FindStringSubmatch(line); m != nil {
			r.Percentile, _ = strconv.Atoi(m[1])
			r.PercentileMs, _ = strconv.ParseFloat(m[2], 64)
		}
	}
	if len(hist) > 0 {
		r.P50Ms = HistogramPercentile(hist, 50)
		r.P95Ms = HistogramPercentile(hist, 95)
		r.P99Ms = HistogramPercentile(hist, 99)
	}
	return r
}

// SysbenchConn is where and as whom sysbench connects, and the tables it
// uses.
type SysbenchConn struct {
	Host, User, Password, DB string
	Port                     int
	Tables, TableSize        int
}

// Args are the sysbench options that select the connection and the data.
func (c SysbenchConn) Args() []string {
	return []string{
		"--db-driver=mysql",
		"--mysql-host=" + c.Host,
		"--mysql-port=" + strconv.Itoa(c.Port),
		"--mysql-user=" + c.User,
		"--mysql-password=" + c.Password,
		"--mysql-db=" + c.DB,
		"--tables=" + strconv.Itoa(c.Tables),
		"--table-size=" + strconv.Itoa(c.TableSize),
	}
}

// RunArgs is the full argument list of one measured run of s against c.
// --db-ps-mode stays at its default (auto: server-side prepared
// statements), so the proxies carry the binary protocol. The histogram
// gives the 50th, 95th and 99th percentiles of one run.
func RunArgs(s Scenario, c SysbenchConn, threads int, seconds int) []string {
	args := []string{s.Workload}
	args = append(args, c.Args()...)
	args = append(args, s.Args...)
	args = append(args,
		"--threads="+strconv.Itoa(threads),
		"--time="+strconv.Itoa(seconds),
		"--report-interval=0",
		"--histogram=on",
		"--percentile=95",
		"run",
	)
	return args
}
