package bench

import (
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    ProcCPU
		wantErr bool
	}{
		{"real bash", "", ProcCPU{UTime: 5, STime: 7}, false},
		{"name with spaces and parentheses",
			"4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 567 0 0 20 0 4 0 100 1000 10 18446744073709551615",
			ProcCPU{UTime: 1234, STime: 567}, false},
		{"no name", "4242 S 1", ProcCPU{}, true},
		{"truncated", "4242 (x) S 1 2 3", ProcCPU{}, true},
		{"not a number", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 abc 567 0", ProcCPU{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := tt.data
			if data == "" {
				data = readTestdata(t, "proc-stat.txt")
			}
			got, err := ParseProcStat(data)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if s := (ProcCPU{UTime: 150, STime: 50}).Seconds(); s != 2 {
		t.Errorf("200 ticks = %v s, want 2", s)
	}
}

func TestParseVmRSS(t *testing.T) {
	got, err := ParseVmRSS(readTestdata(t, "proc-status.txt"))
	if err != nil || got != 4224 {
		t.Errorf("got %d, %v; want 4224", got, err)
	}
	if _, err := ParseVmRSS("Name:\tx\nVmSize:\t 10 kB\n"); err == nil {
		t.Error("no VmRSS: no error")
	}
}

func TestReadOwnProcess(t *testing.T) {
	if _, err := ReadProcCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	rss, err := ReadVmRSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("rss %d, %v", rss, err)
	}
	if _, ok := cpuOf([]int{os.Getpid(), os.Getpid()}); !ok {
		t.Error("cpuOf of this process failed")
	}
	if _, ok := cpuOf(nil); ok {
		t.Error("cpuOf of nothing is known")
	}
}
