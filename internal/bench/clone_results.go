package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/vigil-db/vigil/internal/lifecycle"
)

// The results of `vigil-bench clone` (issue 27, replica lifecycle) and
// the pure parts of their summary: phase durations from a polled
// timeline, queries per second over a window, ratios and the text.

// Kinds of clone runs.
const (
	CloneKindPlain     = "clone"           // no load, no limit: the throughput
	CloneKindLoaded    = "clone+load"      // under the donor's read load, no limit
	CloneKindThrottled = "clone+load+rate" // under the read load, with --rate
)

// clonePhases are the phases a clone goes through, in order.
var clonePhases = []string{lifecycle.PhaseChecking, lifecycle.PhaseFencing, lifecycle.PhaseStreaming, lifecycle.PhasePreparing,
	lifecycle.PhaseReplicating, lifecycle.PhaseVerifying, lifecycle.PhaseRouting}

// RawPipeRun is one `mariadb-backup --backup --stream=xbstream | mbstream
// -x -C DIR` of the donor: the physical limit of a clone on this machine.
type RawPipeRun struct {
	Run     int     `json:"run"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// CPUSeconds: user + system of mariadb-backup and of mbstream.
	CPUSeconds map[string]float64 `json:"cpu_s,omitempty"`
	Error      string             `json:"error,omitempty"`
}

// CloneRun is one `vigil ctl clone TARGET --from DONOR --wait` through
// the daemon.
type CloneRun struct {
	Kind string `json:"kind"`
	Run  int    `json:"run"`
	// Bytes streamed; StreamSeconds is Bytes over the daemon's frozen
	// streaming rate (the streaming phase: backup, transfer and extract).
	Bytes         int64   `json:"bytes"`
	StreamSeconds float64 `json:"stream_seconds"`
	// TotalSeconds is the clone's started → finished, as the daemon says.
	TotalSeconds float64 `json:"total_seconds"`
	// Phases is the seconds spent in each phase, from GET /api/v1/clone
	// polled every 100 ms (a phase shorter than that may be missing, its
	// time counted in the one before).
	Phases    map[string]float64 `json:"phases"`
	RateLimit int64              `json:"rate_limit,omitempty"`
	// CPUSeconds is what each process used during the clone (user +
	// system, from /proc): vigil, each agent and apart the children it
	// waited for (mariadb-backup on the donor; mbstream, the prepare and
	// the sandbox's stop and start commands on the target), the donor's
	// mariadbd.
	CPUSeconds map[string]float64 `json:"cpu_s,omitempty"`
	// Path is how the stream went (lifecycle.PathDirect, PathRelayed).
	Path string `json:"path,omitempty"`
	// Event is the clone_finished event's text.
	Event string `json:"event,omitempty"`
	Error string `json:"error,omitempty"`
	// StreamFrom and StreamTo bound the streaming phase as polled (the
	// read load's window).
	StreamFrom time.Time `json:"stream_from"`
	StreamTo   time.Time `json:"stream_to"`
}

// StreamBytesPerSecond is the streaming phase's rate (0 when unknown).
func (r CloneRun) StreamBytesPerSecond() float64 {
	if r.StreamSeconds <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.StreamSeconds
}

// QPSRun is the donor's read load in one repetition: queries per second
// without a clone (Baseline just before the unlimited clone,
// BaselineThrottled just before the limited one), and while each
// streamed.
type QPSRun struct {
	Run               int     `json:"run"`
	Baseline          float64 `json:"baseline_qps"`
	Unthrottled       float64 `json:"unthrottled_qps"`
	BaselineThrottled float64 `json:"baseline_throttled_qps"`
	Throttled         float64 `json:"throttled_qps"`
	Errors            int64   `json:"errors"`
	Error             string  `json:"error,omitempty"`
}

// HealRun is one kill -9 of the primary with self-healing on.
type HealRun struct {
	Run int    `json:"run"`
	Old string `json:"old_primary"`
	New string `json:"new_primary,omitempty"`
	// WriterSeconds: kill → a new routed writer; RedundantSeconds: kill
	// → three members again (a writer and two replicas both of whose
	// threads run, all ONLINE).
	WriterSeconds    *float64 `json:"writer_s,omitempty"`
	RedundantSeconds *float64 `json:"redundant_s,omitempty"`
	Error            string   `json:"error,omitempty"`
}

// CloneResults is one `vigil-bench clone`.
type CloneResults struct {
	Started time.Time `json:"started"`
	Machine Machine   `json:"machine"`
	// SizeMB is the dataset asked for; TableBytes the table's file on
	// disk, DonorDatadirBytes the donor's datadir (agent status).
	SizeMB            int          `json:"size_mb"`
	TableBytes        int64        `json:"table_bytes"`
	DonorDatadirBytes int64        `json:"donor_datadir_bytes"`
	FillSeconds       float64      `json:"fill_seconds"`
	Reps              int          `json:"reps"`
	RateLimit         int64        `json:"rate_limit"`
	LoadThreads       int          `json:"load_threads"`
	Raw               []RawPipeRun `json:"raw"`
	Clones            []CloneRun   `json:"clones"`
	QPS               []QPSRun     `json:"qps"`
	Heal              []HealRun    `json:"heal,omitempty"`
	HealSkipped       string       `json:"heal_skipped,omitempty"`
	Notes             []string     `json:"notes,omitempty"`
	Summary           CloneSummary `json:"summary"`
}

// CloneSummary is medians and ranges over the repetitions.
type CloneSummary struct {
	// RawMBps and StreamMBps are MB/s (10^6 bytes); StreamVsRaw the
	// ratio of each clone to the raw pipe run just before it.
	RawMBps     *Stat `json:"raw_mb_per_s"`
	StreamMBps  *Stat `json:"stream_mb_per_s"`
	StreamVsRaw *Stat `json:"stream_vs_raw"`
	// TotalSeconds is the whole clone; Phases the seconds per phase.
	TotalSeconds *Stat            `json:"total_s"`
	Phases       map[string]*Stat `json:"phases_s"`
	// RawCPU and CloneCPU are CPU-seconds per process and run; LoadedCPU
	// and ThrottledCPU those of the clones under the donor's read load,
	// unlimited and at --rate.
	RawCPU       map[string]*Stat `json:"raw_cpu_s,omitempty"`
	CloneCPU     map[string]*Stat `json:"clone_cpu_s,omitempty"`
	LoadedCPU    map[string]*Stat `json:"loaded_cpu_s,omitempty"`
	ThrottledCPU map[string]*Stat `json:"throttled_cpu_s,omitempty"`
	// Under the donor's read load.
	LoadedMBps    *Stat `json:"loaded_stream_mb_per_s"`
	ThrottledMBps *Stat `json:"throttled_stream_mb_per_s"`
	// BaselineQPS is over both baselines of every repetition; each ratio
	// divides by the baseline just before its clone.
	BaselineQPS      *Stat `json:"baseline_qps"`
	UnthrottledQPS   *Stat `json:"unthrottled_qps"`
	ThrottledQPS     *Stat `json:"throttled_qps"`
	UnthrottledRatio *Stat `json:"unthrottled_qps_ratio"`
	ThrottledRatio   *Stat `json:"throttled_qps_ratio"`
	HealWriter       *Stat `json:"heal_writer_s,omitempty"`
	HealRedundant    *Stat `json:"heal_redundant_s,omitempty"`
}

// SummarizeClone computes the summary of r's runs.
func SummarizeClone(r *CloneResults) CloneSummary {
	var s CloneSummary
	var raw, stream, vs, total, loaded, throttled []float64
	phases, rawCPU := map[string][]float64{}, map[string][]float64{}
	cpu := map[string]map[string][]float64{CloneKindPlain: {}, CloneKindLoaded: {}, CloneKindThrottled: {}}
	rawByRun := map[int]float64{}
	for _, p := range r.Raw {
		if p.Error == "" && p.Seconds > 0 {
			v := float64(p.Bytes) / p.Seconds / 1e6
			raw = append(raw, v)
			rawByRun[p.Run] = v
			for k, v := range p.CPUSeconds {
				rawCPU[k] = append(rawCPU[k], v)
			}
		}
	}
	for _, c := range r.Clones {
		if c.Error != "" || c.StreamSeconds <= 0 {
			continue
		}
		mbps := c.StreamBytesPerSecond() / 1e6
		if m, ok := cpu[c.Kind]; ok {
			for k, v := range c.CPUSeconds {
				m[k] = append(m[k], v)
			}
		}
		switch c.Kind {
		case CloneKindPlain:
			stream = append(stream, mbps)
			total = append(total, c.TotalSeconds)
			if rv, ok := rawByRun[c.Run]; ok && rv > 0 {
				vs = append(vs, mbps/rv)
			}
			for ph, sec := range c.Phases {
				phases[ph] = append(phases[ph], sec)
			}
		case CloneKindLoaded:
			loaded = append(loaded, mbps)
		case CloneKindThrottled:
			throttled = append(throttled, mbps)
		}
	}
	s.RawMBps, s.StreamMBps, s.StreamVsRaw, s.TotalSeconds = NewStat(raw), NewStat(stream), NewStat(vs), NewStat(total)
	s.LoadedMBps, s.ThrottledMBps = NewStat(loaded), NewStat(throttled)
	s.Phases, s.RawCPU, s.CloneCPU = statsOf(phases), statsOf(rawCPU), statsOf(cpu[CloneKindPlain])
	s.LoadedCPU, s.ThrottledCPU = statsOf(cpu[CloneKindLoaded]), statsOf(cpu[CloneKindThrottled])
	var base, un, th, unR, thR []float64
	for _, q := range r.QPS {
		if q.Error != "" || q.Baseline <= 0 || q.BaselineThrottled <= 0 {
			continue
		}
		base = append(base, q.Baseline, q.BaselineThrottled)
		un, th = append(un, q.Unthrottled), append(th, q.Throttled)
		unR, thR = append(unR, q.Unthrottled/q.Baseline), append(thR, q.Throttled/q.BaselineThrottled)
	}
	s.BaselineQPS, s.UnthrottledQPS, s.ThrottledQPS = NewStat(base), NewStat(un), NewStat(th)
	s.UnthrottledRatio, s.ThrottledRatio = NewStat(unR), NewStat(thR)
	var hw, hr []float64
	for _, h := range r.Heal {
		if h.WriterSeconds != nil {
			hw = append(hw, *h.WriterSeconds)
		}
		if h.RedundantSeconds != nil {
			hr = append(hr, *h.RedundantSeconds)
		}
	}
	s.HealWriter, s.HealRedundant = NewStat(hw), NewStat(hr)
	return s
}

// statsOf summarizes every key's values; nil for none.
func statsOf(m map[string][]float64) map[string]*Stat {
	if len(m) == 0 {
		return nil
	}
	out := map[string]*Stat{}
	for k, v := range m {
		out[k] = NewStat(v)
	}
	return out
}

// PhaseDurations turns the first moment each phase was seen into the
// seconds spent in each: up to the next phase seen, the last one up to
// end. Phases never seen are left out.
func PhaseDurations(seen map[string]time.Time, end time.Time) map[string]float64 {
	out := map[string]float64{}
	var prev string
	var prevAt time.Time
	for _, ph := range clonePhases {
		at, ok := seen[ph]
		if !ok {
			continue
		}
		if prev != "" {
			out[prev] = at.Sub(prevAt).Seconds()
		}
		prev, prevAt = ph, at
	}
	if prev != "" && end.After(prevAt) {
		out[prev] = end.Sub(prevAt).Seconds()
	}
	return out
}

// QPSSample is the load's completed queries so far at a moment.
type QPSSample struct {
	At    time.Time
	Count int64
}

// countAt interpolates the count at t between the samples around it
// (samples in time order); false outside them.
func countAt(samples []QPSSample, t time.Time) (float64, bool) {
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.Before(a.At) || t.After(b.At) {
			continue
		}
		span := b.At.Sub(a.At).Seconds()
		if span <= 0 {
			return float64(b.Count), true
		}
		f := t.Sub(a.At).Seconds() / span
		return float64(a.Count) + f*float64(b.Count-a.Count), true
	}
	return 0, false
}

// QPSBetween is the queries per second between from and to; false when
// the samples do not cover the window.
func QPSBetween(samples []QPSSample, from, to time.Time) (float64, bool) {
	if !to.After(from) {
		return 0, false
	}
	c0, ok0 := countAt(samples, from)
	c1, ok1 := countAt(samples, to)
	if !ok0 || !ok1 {
		return 0, false
	}
	return (c1 - c0) / to.Sub(from).Seconds(), true
}

// fmtSpread is "median (min–max, N runs)".
func fmtSpread(st *Stat, f func(float64) string) string {
	if st == nil {
		return na
	}
	if st.N == 1 {
		return f(st.Median) + " (1 run)"
	}
	return fmt.Sprintf("%s (%s, %d runs)", fmtStat(st, f), fmtRange(st, f), st.N)
}

// writeCPU lists CPU-seconds per process, by name.
func writeCPU(b *strings.Builder, title string, m map[string]*Stat) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(b, "   %s:\n", title)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(b, "     %-40s %s\n", k, fmtSpread(m[k], fmt1))
	}
}

// WriteCloneText prints r for a reader: the machine, the throughput
// against the raw pipe, the phases, the donor's qps and the heal times.
func WriteCloneText(w io.Writer, r *CloneResults) error {
	var b strings.Builder
	m := r.Machine
	s := r.Summary
	fmt.Fprintf(&b, "vigil-bench clone, %s\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "machine: %d CPUs (%s), kernel %s, load average %s at the start, %s at the end\n", m.CPUs, m.CPUModel, m.Kernel, m.LoadStart, m.LoadEnd)
	fmt.Fprintf(&b, "mariadbd: %s; vigil: %s\n", m.Mariadbd, m.Vigil)
	fmt.Fprintf(&b, "dataset: %d MB asked, table file %.0f MB on disk, donor datadir %.0f MB; filled in %.0f s; %d reps\n\n",
		r.SizeMB, float64(r.TableBytes)/1e6, float64(r.DonorDatadirBytes)/1e6, r.FillSeconds, r.Reps)
	fmt.Fprintf(&b, "1. Clone throughput (no load), median (min–max)\n")
	fmt.Fprintf(&b, "   raw mariadb-backup --stream | mbstream -x, MB/s : %s\n", fmtSpread(s.RawMBps, fmt1))
	fmt.Fprintf(&b, "   vigil ctl clone, streaming phase, MB/s          : %s\n", fmtSpread(s.StreamMBps, fmt1))
	fmt.Fprintf(&b, "   clone / raw pipe (paired runs)                  : %s (target >= 0.80)\n", fmtSpread(s.StreamVsRaw, fmt2))
	fmt.Fprintf(&b, "   whole clone (checking → routed), s              : %s\n", fmtSpread(s.TotalSeconds, fmt1))
	for _, ph := range clonePhases {
		if st, ok := s.Phases[ph]; ok {
			fmt.Fprintf(&b, "     %-12s s: %s\n", ph, fmtSpread(st, fmt2))
		}
	}
	writeCPU(&b, "CPU-seconds of a raw pipe", s.RawCPU)
	writeCPU(&b, "CPU-seconds of a clone", s.CloneCPU)
	fmt.Fprintf(&b, "\n2. Donor read load (%d threads, point selects, direct to the donor), median (min–max)\n", r.LoadThreads)
	fmt.Fprintf(&b, "   baseline, qps: %s\n", fmtSpread(s.BaselineQPS, fmtInt))
	fmt.Fprintf(&b, "   during an unlimited clone: qps %s, ratio %s; stream MB/s %s\n",
		fmtSpread(s.UnthrottledQPS, fmtInt), fmtSpread(s.UnthrottledRatio, fmt2), fmtSpread(s.LoadedMBps, fmt1))
	fmt.Fprintf(&b, "   during a clone at --rate %.1f MB/s: qps %s, ratio %s; stream MB/s %s\n", float64(r.RateLimit)/1e6,
		fmtSpread(s.ThrottledQPS, fmtInt), fmtSpread(s.ThrottledRatio, fmt2), fmtSpread(s.ThrottledMBps, fmt1))
	writeCPU(&b, "CPU-seconds of an unlimited clone under the load", s.LoadedCPU)
	writeCPU(&b, "CPU-seconds of a clone at --rate under the load", s.ThrottledCPU)
	fmt.Fprintf(&b, "\n3. Kill -9 of the primary → full redundancy (self-healing)\n")
	switch {
	case r.HealSkipped != "":
		fmt.Fprintf(&b, "   skipped: %s\n", r.HealSkipped)
	default:
		fmt.Fprintf(&b, "   kill → new writer, s     : %s\n", fmtSpread(s.HealWriter, fmt1))
		fmt.Fprintf(&b, "   kill → 3 members again, s: %s\n", fmtSpread(s.HealRedundant, fmt1))
		for _, h := range r.Heal {
			if h.Error != "" {
				fmt.Fprintf(&b, "   run %d (%s): %s\n", h.Run, h.Old, h.Error)
			}
		}
	}
	var failed []string
	for _, p := range r.Raw {
		if p.Error != "" {
			failed = append(failed, fmt.Sprintf("raw run %d: %s", p.Run, p.Error))
		}
	}
	for _, c := range r.Clones {
		if c.Error != "" {
			failed = append(failed, fmt.Sprintf("%s run %d: %s", c.Kind, c.Run, c.Error))
		}
	}
	for _, q := range r.QPS {
		if q.Error != "" {
			failed = append(failed, fmt.Sprintf("load run %d: %s", q.Run, q.Error))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nFailed runs:\n  %s\n", strings.Join(failed, "\n  "))
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, "\nNotes:\n  %s\n", strings.Join(r.Notes, "\n  "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
