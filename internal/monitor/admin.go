package monitor

import (
	"fmt"
	"time"

	"github.com/vigil-db/vigil/internal/topology"
)

// Commands of operators and of the failover executor, as pure changes of a
// State; Command evaluates them.

// setAdmin sets the operator's state of server i: OfflineSoft (drain),
// OfflineHard, or Online to clear the override (the server then shows what
// its checks say).
func setAdmin(i int, state topology.State, reason string) func(*State) error {
	return func(st *State) error {
		s := &st.Servers[i]
		switch state {
		case topology.Online:
			if s.Fenced {
				return fmt.Errorf("server %s is fenced; unfence it first", s.Name)
			}
		case topology.OfflineSoft, topology.OfflineHard:
		default:
			return fmt.Errorf("an operator sets ONLINE, OFFLINE_SOFT or OFFLINE_HARD, not %s", state)
		}
		s.Admin, s.AdminReason = state, reason
		if state == topology.Online {
			s.AdminReason = ""
		}
		return nil
	}
}

// fence marks server i OfflineHard until unfence. A fenced replication
// primary stops being the primary: only SetWriter names the next one.
func fence(i int, reason string) func(*State) error {
	return func(st *State) error {
		s := &st.Servers[i]
		s.Fenced, s.FenceReason = true, reason
		if st.Designated == i {
			st.Designated = -1
			st.WriterNote = ""
		}
		return nil
	}
}

// setTerm makes the term the coordination record's from now on.
func setTerm(term uint64) func(*State) error {
	return func(st *State) error {
		st.Term, st.TermShared = term, true
		return nil
	}
}

func unfence(i int) func(*State) error {
	return func(st *State) error {
		st.Servers[i].Fenced, st.Servers[i].FenceReason = false, ""
		return nil
	}
}

// setWriter names server i the writer. In a replication cluster it becomes
// the primary even before it reports read_only=OFF (the executor promotes
// it); it is routed as soon as it is Online and writable. In Galera and
// read-only clusters it must be able to take writes now.
func setWriter(i int, opts *Options, reason string) func(*State) error {
	return setWriterAt(i, opts, reason, time.Time{})
}

// setWriterAt is setWriter at time at: the server that was the writer
// until then is not a "conflict" for a check that started before at (the
// executor made it read-only just before; that check may not show it).
func setWriterAt(i int, opts *Options, reason string, at time.Time) func(*State) error {
	return func(st *State) error {
		s := &st.Servers[i]
		if s.Fenced {
			return fmt.Errorf("server %s is fenced", s.Name)
		}
		if opts.Type == TypeGalera || opts.Type == TypeReadOnly {
			if _, w := s.access(); !w {
				return fmt.Errorf("server %s cannot take writes now (%s)", s.Name, st.whyNot(i))
			}
		}
		if d := st.Designated; d >= 0 && d != i {
			st.Servers[d].DemotedAt = at
		}
		st.Designated = i
		st.Discovered = true
		if opts.Type == TypeReplication {
			// The executor promotes it: it was shunned for what the
			// promotion ends (its replication stopped on purpose), not for
			// failing. Its next good check routes it at once rather than
			// after recover_after of them (a check that started before
			// it turned writable may still fail first).
			s.Promoted = true
		}
		st.WriterNote = " (set: " + reason + ")"
		if opts.Type != TypeReplication {
			st.WriterReason = s.Name + " set as writer: " + reason
		}
		return nil
	}
}
