package executor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/vigil-db/vigil/internal/failover"
)

// journal is an append-only JSON-lines file per cluster under state_dir:
// operation records (the failover history, which survives restarts so
// anti-flapping does too) and events.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

type journalLine struct {
	Record *failover.Record `json:"record,omitempty"`
	Event  *Event           `json:"event,omitempty"`
}

func openJournal(stateDir, cluster string) (*journal, failover.History, error) {
	var hist failover.History
	if stateDir == "" {
		return &journal{}, hist, nil
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, hist, fmt.Errorf("state_dir: %w", err)
	}
	path := filepath.Join(stateDir, "journal-"+cluster+".jsonl")
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		byStart := map[string]int{}
		for sc.Scan() {
			var l journalLine
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Record == nil {
				continue
			}
			// A record is written when it starts and again when it ends or
			// is acknowledged: keep the latest version.
			k := l.Record.Kind.String() + l.Record.Started.String()
			if i, ok := byStart[k]; ok {
				hist.Records[i] = *l.Record
			} else {
				byStart[k] = len(hist.Records)
				hist.Records = append(hist.Records, *l.Record)
			}
		}
		f.Close()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, hist, fmt.Errorf("journal: %w", err)
	}
	return &journal{f: f}, hist, nil
}

func (j *journal) write(l journalLine) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := j.f.Write(b); err != nil {
		return err
	}
	return j.f.Sync()
}

func (j *journal) record(r failover.Record) error { return j.write(journalLine{Record: &r}) }
func (j *journal) event(e Event) error            { return j.write(journalLine{Event: &e}) }

func (j *journal) close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}
