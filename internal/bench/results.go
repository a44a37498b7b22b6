package bench

import (
	"time"
)

// Target names. The order of Targets is the order of every round.
const (
	TargetDirect  = "direct"
	TargetVigil   = "vigil"
	TargetHAProxy = "haproxy"
)

// Target is one address sysbench is pointed at.
type Target struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// PID is the proxy process whose CPU and memory are measured; 0 for
	// a target without one (direct).
	PID         int    `json:"pid,omitempty"`
	Description string `json:"description"`
	// Admin is a Vigil's admin API address, for its pool sizes.
	Admin      string `json:"admin,omitempty"`
	adminToken string
}

// Measurement is one measured sysbench run of one scenario against one target.
type Measurement struct {
	// Seq is the position of the run in the whole sequence (1-based).
	Seq      int    `json:"seq"`
	Scenario string `json:"scenario"`
	Target   string `json:"target"`
	Rep      int    `json:"rep"`
	Threads  int    `json:"threads"`
	// Idle is the number of idle clients held open (many_clients).
	Idle  int       `json:"idle,omitempty"`
	Start time.Time `json:"start"`
	// Generator is the client: sysbench, or go (the Go load generator,
	// whose numbers are reported in the same fields).
	Generator string `json:"generator,omitempty"`
	// Skipped says why this target could not run this case at all; such
	// a run has no numbers and is not a failure.
	Skipped string `json:"skipped,omitempty"`
	// WallSeconds is the time from starting sysbench to its exit.
	WallSeconds float64        `json:"wall_s"`
	Sysbench    SysbenchResult `json:"sysbench"`
	ExitCode    int            `json:"exit_code"`
	// Error is why the run failed, if it did.
	Error string `json:"error,omitempty"`

	// Proxy measurements; null for direct or when /proc could not be read.
	ProxyCPUSeconds    *float64 `json:"proxy_cpu_s"`
	ProxyCPUUsPerQuery *float64 `json:"proxy_cpu_us_per_query"`
	ProxyRSSKiB        *int64   `json:"proxy_rss_kib"`
	// ServerCPUUsPerQuery is the CPU of all mariadbd processes together,
	// ClientCPUUsPerQuery that of sysbench.
	ServerCPUUsPerQuery *float64 `json:"server_cpu_us_per_query"`
	ClientCPUUsPerQuery *float64 `json:"client_cpu_us_per_query"`
	// ServerCounters is the growth of the ServerCounters of every node
	// during the run (node → counter → delta). ReplicaSelectShare is the
	// part of all Com_select on replicas; ServerStatementsPerQuery is all
	// Questions of all nodes over the client's queries (about 1 without a
	// proxy; the monitor's and these counters' own queries add a little).
	ServerCounters           map[string]map[string]int64 `json:"server_counters,omitempty"`
	ReplicaSelectShare       *float64                    `json:"replica_select_share"`
	ServerStatementsPerQuery *float64                    `json:"server_statements_per_query"`
	// ServerConnections is the sum of Threads_connected over all nodes
	// in the middle of a many_clients run; OpenSeconds is how long
	// opening the idle clients took.
	ServerConnections *int64   `json:"server_connections,omitempty"`
	OpenSeconds       *float64 `json:"open_seconds,omitempty"`
}

// Failed reports a run that did not complete cleanly; a skipped one did
// not run and has not failed.
func (r Measurement) Failed() bool {
	return r.Skipped == "" && (r.Error != "" || r.Sysbench.Failed())
}

// Config is what was asked for, as recorded in results.json.
type Config struct {
	Scenarios []Scenario `json:"scenarios"`
	Targets   []Target   `json:"targets"`
	// Threads of the sysbench matrix; every case has its own in Cases.
	Threads      []int      `json:"threads"`
	Duration     string     `json:"duration"`
	Warmup       string     `json:"warmup"`
	Reps         int        `json:"reps"`
	CheckReps    int        `json:"check_reps"`
	Clients      []int      `json:"idle_clients"`
	RuleCounts   []int      `json:"rule_counts"`
	FailoverRuns int        `json:"failover_runs"`
	Pin          Pinning    `json:"pin"`
	Cases        []CaseInfo `json:"cases"`
	Quick        bool       `json:"quick"`
	Tables       int        `json:"tables"`
	TableSize    int        `json:"table_size"`
	Sandbox      string     `json:"sandbox"`
	// BaselineServerConnections is Threads_connected summed over the
	// nodes before the first run: replication, monitors, the bench's own.
	BaselineServerConnections *int64 `json:"baseline_server_connections,omitempty"`
}

// CaseInfo is a Case as recorded in results.json.
type CaseInfo struct {
	Key      string `json:"key"`
	Scenario string `json:"scenario"`
	Threads  int    `json:"threads"`
	Idle     int    `json:"idle,omitempty"`
	Reps     int    `json:"reps"`
	Duration string `json:"duration,omitempty"`
	Warmup   string `json:"warmup,omitempty"`
	Check    bool   `json:"check,omitempty"`
}

// Results is everything one vigil-bench produced: results.json.
type Results struct {
	// Schema changes when a field changes meaning.
	Schema   int           `json:"schema"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Machine  Machine       `json:"machine"`
	Config   Config        `json:"config"`
	Runs     []Measurement `json:"runs"`
	// Failover are the kill -9 and switchover runs, with their timelines.
	Failover []FailoverRun `json:"failover,omitempty"`
	Summary  Summary       `json:"summary"`
	// Comparison is what moved since the previous results.json.
	Comparison *Comparison `json:"comparison,omitempty"`
	// Plots are the image files written next to results.json.
	Plots []string `json:"plots,omitempty"`
	// Notes are things that went wrong around the runs (a log that could
	// not be copied, a replica that lagged).
	Notes []string `json:"notes,omitempty"`
}

// ResultsSchema is the current Results.Schema.
//
// 2: a case is a scenario at one thread count (threads is a list in the
// config), p50/p99 latencies, the Go load generator's scenarios, failover
// runs and the comparison with the previous results.
const ResultsSchema = 2

func ptr[T any](v T) *T { return &v }
