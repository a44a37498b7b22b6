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
}

// Measurement is one measured sysbench run of one scenario against one target.
type Measurement struct {
	// Seq is the position of the run in the whole sequence (1-based).
	Seq      int       `json:"seq"`
	Scenario string    `json:"scenario"`
	Target   string    `json:"target"`
	Rep      int       `json:"rep"`
	Threads  int       `json:"threads"`
	Start    time.Time `json:"start"`
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
}

// Failed reports a run that did not complete cleanly.
func (r Measurement) Failed() bool { return r.Error != "" || r.Sysbench.Failed() }

// Config is what was asked for, as recorded in results.json.
type Config struct {
	Scenarios []Scenario `json:"scenarios"`
	Targets   []Target   `json:"targets"`
	Threads   int        `json:"threads"`
	Duration  string     `json:"duration"`
	Warmup    string     `json:"warmup"`
	Reps      int        `json:"reps"`
	Quick     bool       `json:"quick"`
	Tables    int        `json:"tables"`
	TableSize int        `json:"table_size"`
	Sandbox   string     `json:"sandbox"`
}

// Results is everything one vigil bench produced: results.json.
type Results struct {
	// Schema changes when a field changes meaning.
	Schema   int           `json:"schema"`
	Started  time.Time     `json:"started"`
	Finished time.Time     `json:"finished"`
	Machine  Machine       `json:"machine"`
	Config   Config        `json:"config"`
	Runs     []Measurement `json:"runs"`
	Summary  Summary       `json:"summary"`
	// Notes are things that went wrong around the runs (a log that could
	// not be copied, a replica that lagged).
	Notes []string `json:"notes,omitempty"`
}

// ResultsSchema is the current Results.Schema.
const ResultsSchema = 1

func ptr[T any](v T) *T { return &v }
