package lifecycle

import (
	"sync"
	"time"
)

// Phases of a clone, in order; a clone ends in PhaseDone or PhaseFailed.
const (
	PhaseChecking    = "checking"    // both agents answer, the target is not writable
	PhaseFencing     = "fencing"     // taking the target out of routing
	PhaseStreaming   = "streaming"   // donor backup → target restore
	PhasePreparing   = "preparing"   // the stream is complete; the target's agent prepares, swaps and starts
	PhaseReplicating = "replicating" // gtid_slave_pos, CHANGE MASTER to the writer, START SLAVE
	PhaseVerifying   = "verifying"   // waiting for both replication threads
	PhaseRouting     = "routing"     // handing the target back to the monitor
	PhaseDone        = "done"
	PhaseFailed      = "failed"
)

// Progress is one clone as the API shows it.
type Progress struct {
	ID int64 `json:"id"`
	// Kind is clone, rebuild or replace.
	Kind    string `json:"kind"`
	Cluster string `json:"cluster"`
	Target  string `json:"target"`
	Donor   string `json:"donor"`
	// DonorReason says why this donor.
	DonorReason string `json:"donor_reason"`
	Phase       string `json:"phase"`
	// Bytes streamed so far; TotalBytes is the donor's datadir size (the
	// estimate the ETA is computed from).
	Bytes      int64 `json:"bytes"`
	TotalBytes int64 `json:"total_bytes"`
	// RateBytes is the mean streaming rate (bytes/s); ETASeconds the
	// streaming time left at that rate (-1: unknown).
	RateBytes  float64 `json:"rate_bytes_per_second"`
	ETASeconds float64 `json:"eta_seconds"`
	// Path is how the stream goes: "agent to agent" (the target's agent
	// pulls it from the donor's) or "relayed by Vigil".
	Path string `json:"path,omitempty"`
	// DonorRestarts counts restarts from another donor after a failed
	// stream.
	DonorRestarts int `json:"donor_restarts,omitempty"`
	// Limit is the requested rate limit (bytes/s, 0: none).
	Limit    int64      `json:"rate_limit,omitempty"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	// GTID is where the target started replicating (from the backup).
	GTID string `json:"gtid,omitempty"`
	// OldDatadir is where the target's agent kept the previous datadir.
	OldDatadir string `json:"old_datadir,omitempty"`
	// Salvage says where a rebuild wrote what its target held that the
	// primary lacked.
	Salvage string `json:"salvage,omitempty"`
	// Replaces is the lost member a replacement takes the place of.
	Replaces string `json:"replaces,omitempty"`
	Error    string `json:"error,omitempty"`
	// Running: not done nor failed.
	Running bool `json:"running"`
}

// tracker holds one clone's Progress; the run writes it, the API reads
// copies.
type tracker struct {
	mu          sync.Mutex
	p           Progress
	streamStart time.Time
	now         func() time.Time
	onBytes     func(n int64)
}

func (t *tracker) view() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.p
	if p.Phase == PhaseStreaming && !t.streamStart.IsZero() {
		if el := t.now().Sub(t.streamStart).Seconds(); el > 0 {
			p.RateBytes = float64(p.Bytes) / el
		}
		p.ETASeconds = -1
		if p.RateBytes > 0 && p.TotalBytes > 0 {
			p.ETASeconds = max(0, float64(p.TotalBytes-p.Bytes)/p.RateBytes)
		}
	}
	return p
}

func (t *tracker) phase(ph string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p.Phase == PhaseStreaming && ph != PhaseStreaming {
		// Freeze the streaming rate at its end.
		if el := t.now().Sub(t.streamStart).Seconds(); el > 0 {
			t.p.RateBytes = float64(t.p.Bytes) / el
		}
		t.p.ETASeconds = 0
	}
	t.p.Phase = ph
	if ph == PhaseStreaming {
		t.streamStart = t.now()
	}
}

func (t *tracker) set(f func(p *Progress)) {
	t.mu.Lock()
	f(&t.p)
	t.mu.Unlock()
}

// Write counts streamed bytes.
func (t *tracker) add(n int) {
	t.mu.Lock()
	t.p.Bytes += int64(n)
	t.mu.Unlock()
	if t.onBytes != nil {
		t.onBytes(int64(n))
	}
}
