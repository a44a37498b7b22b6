package failover

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// String renders the decision for operators and --dry-run: the situation
// and action, why, the plan's steps, every server's candidacy and the
// events. The golden scenario tests compare this text.
func (d Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s: %s → %s\n", orNone(d.Cluster), d.Situation, d.Action)
	if d.Request != nil {
		fmt.Fprintf(&b, "request: %s\n", d.Request)
	}
	if d.Detected != d.Situation {
		fmt.Fprintf(&b, "detected: %s (%s)\n", d.Detected, d.Detected.Description())
	}
	fmt.Fprintf(&b, "meaning: %s\n", d.Situation.Description())
	if d.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", d.Reason)
	}
	if !d.RecheckAt.IsZero() {
		fmt.Fprintf(&b, "recheck at: %s\n", stamp(d.RecheckAt))
	}
	if d.Plan != nil {
		if d.Request != nil && d.Request.DryRun {
			b.WriteString("dry run: the plan is shown, not executed\n")
		}
		b.WriteString(d.Plan.String())
	}
	if len(d.Choices) > 0 {
		b.WriteString("candidates:\n")
		for _, c := range d.Choices {
			fmt.Fprintf(&b, "  %s\n", c)
		}
	}
	if len(d.FenceNotes) > 0 {
		b.WriteString("kept fenced:\n")
		for _, name := range slices.Sorted(maps.Keys(d.FenceNotes)) {
			fmt.Fprintf(&b, "  %s: %s\n", name, d.FenceNotes[name])
		}
	}
	if len(d.Events) > 0 {
		b.WriteString("events:\n")
		for _, e := range d.Events {
			fmt.Fprintf(&b, "  - %s\n", e)
		}
	}
	return b.String()
}

func (r *Request) String() string {
	s := r.Kind.String()
	switch {
	case r.Kind == RequestRejoin:
		s += " " + r.To
	case r.To != "":
		s += " --to " + r.To
	}
	if r.Force {
		s += " --force"
	}
	if r.DryRun {
		s += " --dry-run"
	}
	return s
}

// String renders the plan: header, steps in order, rollback.
func (p *Plan) String() string {
	var b strings.Builder
	auto := "requested"
	if p.Auto {
		auto = "automatic"
	}
	switch p.Kind {
	case KindRejoin:
		fmt.Fprintf(&b, "plan: rejoin %s as a replica of %s (%s, term stays %d)\n", p.OldPrimary, p.NewPrimary, p.Flavor, p.Term)
	case KindRestoreWriter:
		fmt.Fprintf(&b, "plan: %s restore-writer: make the primary %s writable and route writes to it, term %d (%s)\n", auto, p.NewPrimary, p.Term, p.Flavor)
	default:
		fmt.Fprintf(&b, "plan: %s %s %s → %s, term %d (%s)\n", auto, p.Kind, orNone(p.OldPrimary), p.NewPrimary, p.Term, p.Flavor)
	}
	if len(p.Repoint) > 0 {
		fmt.Fprintf(&b, "  repoint: %s\n", strings.Join(p.Repoint, ", "))
	}
	for _, q := range p.Quarantine {
		fmt.Fprintf(&b, "  quarantine: %s (holds %s)\n", q.Server, q.Extra)
	}
	if len(p.Unreachable) > 0 {
		fmt.Fprintf(&b, "  unreachable, left alone: %s\n", strings.Join(p.Unreachable, ", "))
	}
	for i, s := range p.Steps {
		if len(p.Rollback) > 0 && i == p.NoReturn {
			b.WriteString("  -- point of no return: a failure from here on stops the plan without rollback\n")
		}
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, s)
	}
	if len(p.Rollback) > 0 {
		fmt.Fprintf(&b, "  rollback (when a step before %d fails):\n", p.NoReturn+1)
		for i, s := range p.Rollback {
			fmt.Fprintf(&b, "   r%d. %s\n", i+1, s)
		}
	}
	return b.String()
}

func (s Step) String() string {
	var b strings.Builder
	b.WriteString(s.Kind.String())
	if s.Server != "" {
		b.WriteString(" " + s.Server)
	}
	if s.Source != "" {
		b.WriteString(" ← " + s.Source)
	}
	b.WriteString(": " + s.Detail)
	var tags []string
	if s.Timeout > 0 {
		tags = append(tags, "timeout "+s.Timeout.String())
	}
	if s.OnFail != Abort {
		tags = append(tags, "on failure: "+s.OnFail.String())
	}
	if len(tags) > 0 {
		b.WriteString(" [" + strings.Join(tags, ", ") + "]")
	}
	return b.String()
}

func (c Choice) String() string {
	switch {
	case c.Chosen:
		return fmt.Sprintf("%s: CHOSEN — %s", c.Server, c.Reason)
	case c.Excluded == Eligible:
		return fmt.Sprintf("%s: not chosen — %s", c.Server, c.Reason)
	case c.Excluded == IsPrimary:
		return fmt.Sprintf("%s: %s", c.Server, c.Reason)
	}
	return fmt.Sprintf("%s: excluded (%s) — %s", c.Server, c.Excluded, c.Reason)
}
