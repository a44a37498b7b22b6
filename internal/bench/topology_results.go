package bench

import (
	"fmt"
	"syscall"
	"time"
)

// TopologyResultsSchema is the version of the topology results.json.
const TopologyResultsSchema = 1

// TopologyResults is results.json of `vigil-bench topology`.
type TopologyResults struct {
	Schema   int            `json:"schema"`
	Kind     string         `json:"kind"`
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Machine  Machine        `json:"machine"`
	Storage  Storage        `json:"storage"`
	Config   TopologyConfig `json:"config"`
	// Checks are the read-only checks of servers the bench did not
	// create (--sandbox, --config), one line each.
	Checks []string  `json:"checks,omitempty"`
	Runs   []TopoRun `json:"runs"`
	// Shapes say which known shapes the runs reproduced.
	Shapes []Shape `json:"shapes"`
	// Losses are, per topology, what a failover can lose, from the runs.
	Losses []Loss   `json:"losses"`
	Notes  []string `json:"notes,omitempty"`
	Plots  []string `json:"plots,omitempty"`
}

// TopologyConfig is what the bench was asked to do.
type TopologyConfig struct {
	Topologies        []string `json:"topologies"`
	Workloads         []string `json:"workloads"`
	Threads           []int    `json:"threads"`
	Paths             []string `json:"paths"`
	Duration          string   `json:"duration"`
	Warmup            string   `json:"warmup"`
	Quick             bool     `json:"quick"`
	Tables            int      `json:"tables"`
	TableSize         int      `json:"table_size"`
	Sandbox           string   `json:"sandbox,omitempty"`
	VigilConfig       string   `json:"vigil_config,omitempty"`
	Cluster           string   `json:"cluster,omitempty"`
	VaryDurability    bool     `json:"vary_durability"`
	SemiSyncTimeoutMs int      `json:"semi_sync_timeout_ms"`
}

// Storage is what the datadirs are on: a tmpfs makes fsync free.
type Storage struct {
	Dir    string `json:"dir"`
	FSType string `json:"fs_type"`
	Tmpfs  bool   `json:"tmpfs"`
}

// Medium says tmpfs (memory) or disk.
// String is the file system and what it means for fsync, for reports.
func (s Storage) String() string {
	if s.FSType == "" || s.FSType == "unknown" {
		return s.Medium()
	}
	return s.FSType + " (" + s.Medium() + ")"
}

func (s Storage) Medium() string {
	switch {
	case s.FSType == "" || s.FSType == "unknown":
		return "unknown: not the bench's servers"
	case s.Tmpfs:
		return "tmpfs: memory, fsync costs nothing"
	}
	return "disk: fsync reaches the device"
}

// File system magic numbers of statfs(2).
var fsMagic = map[int64]string{
	0x01021994: "tmpfs",
	0xEF53:     "ext4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x794c7630: "overlayfs",
	0x2FC12FC1: "zfs",
	0x6969:     "nfs",
	0x858458f6: "ramfs",
}

// DescribeStorage statfs's dir.
func DescribeStorage(dir string) Storage {
	s := Storage{Dir: dir, FSType: "unknown"}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return s
	}
	s.FSType = FSTypeName(int64(st.Type))
	s.Tmpfs = s.FSType == "tmpfs" || s.FSType == "ramfs"
	return s
}

// FSTypeName names a statfs f_type.
func FSTypeName(magic int64) string {
	if n, ok := fsMagic[magic]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", magic)
}

// TopoRun is one measured sysbench run on one topology variant.
type TopoRun struct {
	Seq      int    `json:"seq"`
	Topology string `json:"topology"`
	Variant  string `json:"variant"`
	Workload string `json:"workload"`
	Threads  int    `json:"threads"`
	Path     string `json:"path"`
	// Primary is the node written to and whose status deltas these are.
	Primary string `json:"primary,omitempty"`
	// TrxCommit and SyncBinlog are the primary's values during the run.
	TrxCommit    string  `json:"innodb_flush_log_at_trx_commit"`
	SyncBinlog   string  `json:"sync_binlog"`
	SlaveThreads int     `json:"wsrep_slave_threads,omitempty"`
	FCLimit      int     `json:"gcs_fc_limit,omitempty"`
	Seconds      float64 `json:"seconds"`
	TPS          float64 `json:"tps"`
	QPS          float64 `json:"qps"`
	AvgMs        float64 `json:"latency_avg_ms"`
	P95Ms        float64 `json:"latency_p95_ms"`
	P99Ms        float64 `json:"latency_p99_ms"`
	Transactions int64   `json:"transactions"`
	Errors       int64   `json:"errors"`
	Failed       string  `json:"failed,omitempty"`
	// StatusDelta are the SHOW GLOBAL STATUS deltas on the primary.
	StatusDelta map[string]int64 `json:"status_delta,omitempty"`
	// FsyncsPerTrx is Innodb_data_fsyncs per sysbench transaction;
	// CommitsPerGroup Binlog_commits per Binlog_group_commits.
	FsyncsPerTrx    *float64       `json:"fsyncs_per_trx,omitempty"`
	CommitsPerGroup *float64       `json:"commits_per_group,omitempty"`
	SemiSync        *SemiSyncStats `json:"semi_sync,omitempty"`
	Replicas        []ReplicaLag   `json:"replicas,omitempty"`
	Galera          *GaleraStats   `json:"galera,omitempty"`
	// CatchUpSeconds is how long the replicas (or Galera appliers) took
	// after the run to apply everything.
	CatchUpSeconds *float64 `json:"catch_up_seconds,omitempty"`
	Notes          []string `json:"notes,omitempty"`
}

// SemiSyncStats is what semi-sync did during a run.
type SemiSyncStats struct {
	// NoTxDelta and YesTxDelta: commits not acknowledged by a replica
	// (fallen back to async) and acknowledged ones.
	NoTxDelta    int64 `json:"no_tx_delta"`
	YesTxDelta   int64 `json:"yes_tx_delta"`
	NoTimesDelta int64 `json:"no_times_delta"`
	// AsyncSeconds is the time Rpl_semi_sync_master_status was OFF,
	// polled every 150 ms, of RunSeconds.
	AsyncSeconds float64 `json:"async_seconds"`
	RunSeconds   float64 `json:"run_seconds"`
	Samples      int     `json:"samples"`
	OffAtEnd     bool    `json:"off_at_end"`
	Clients      int64   `json:"clients"`
	TimeoutMs    int     `json:"timeout_ms"`
}

// ReplicaLag is one replica when the run ended.
type ReplicaLag struct {
	Node          string `json:"node"`
	TrxBehind     int64  `json:"trx_behind"`
	SecondsBehind *int64 `json:"seconds_behind_master,omitempty"`
}

// GaleraStats is flow control during a run: the worst node and each.
type GaleraStats struct {
	// PausedFraction is the largest share of the run a node spent paused
	// by flow control (wsrep_flow_control_paused_ns delta / run time).
	PausedFraction float64      `json:"flow_control_paused"`
	RecvQueueAvg   float64      `json:"local_recv_queue_avg"`
	FCSent         int64        `json:"flow_control_sent"`
	FCRecv         int64        `json:"flow_control_recv"`
	Nodes          []GaleraNode `json:"nodes"`
}

// GaleraNode is one node's flow control.
type GaleraNode struct {
	Node           string  `json:"node"`
	PausedNs       int64   `json:"flow_control_paused_ns"`
	PausedFraction float64 `json:"flow_control_paused"`
	// PausedSinceFlush is wsrep_flow_control_paused itself, a fraction
	// since the FLUSH STATUS before the run (0 when not flushed).
	PausedSinceFlush float64 `json:"flow_control_paused_status"`
	RecvQueueAvg     float64 `json:"local_recv_queue_avg"`
	RecvQueueEnd     int64   `json:"local_recv_queue_end"`
	FCSent           int64   `json:"flow_control_sent"`
	FCRecv           int64   `json:"flow_control_recv"`
}

// MaxTrxBehind is the most transactions a replica was behind at the end.
func (r TopoRun) MaxTrxBehind() int64 {
	var n int64
	for _, l := range r.Replicas {
		n = max(n, l.TrxBehind)
	}
	return n
}

// Shape is one known shape and whether the runs reproduced it.
type Shape struct {
	Name       string `json:"name"`
	Reproduced bool   `json:"reproduced"`
	// Measured is false when the runs had nothing to decide with.
	Measured bool   `json:"measured"`
	Evidence string `json:"evidence"`
}

// Loss is what a failover can lose with one topology (variant).
type Loss struct {
	Topology string `json:"topology"`
	Variant  string `json:"variant,omitempty"`
	Sentence string `json:"sentence"`
}

// Name is the topology and the variant, if any.
func (l Loss) Name() string {
	if l.Variant == "" {
		return l.Topology
	}
	return l.Topology + " " + l.Variant
}

// Verdict is one of the three words: not reproduced, not measured,
// reproduced.
func (s Shape) Verdict(no, unmeasured, yes string) string {
	switch {
	case !s.Measured:
		return unmeasured
	case s.Reproduced:
		return yes
	}
	return no
}
