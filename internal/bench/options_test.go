package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaultsAndValidate(t *testing.T) {
	o := Options{VigilBin: "/bin/true"}
	o.setDefaults()
	if !slices.Equal(o.Threads, []int{8, 32, 128}) || o.Duration != 8*time.Second || o.Reps != 2 || o.CheckReps != 5 ||
		o.Warmup != 2*time.Second || !slices.Equal(o.Clients, []int{1000, 10000}) || !slices.Equal(o.RuleCounts, []int{100, 1000}) ||
		o.FailoverRuns != 5 || o.Tables != 4 || o.TableSize != 20000 || o.OutDir != "bench/out" || len(o.Scenarios) != 8 || o.Progress == nil {
		t.Errorf("defaults: %+v", o)
	}
	few := Options{VigilBin: "v", Reps: 7, CheckReps: 3}
	few.setDefaults()
	if few.CheckReps != 7 {
		t.Errorf("check reps %d below reps %d", few.CheckReps, few.Reps)
	}
	if err := o.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	none := Options{Warmup: -1}
	none.setDefaults()
	if none.Warmup != 0 {
		t.Errorf("negative warm-up = %s, want none", none.Warmup)
	}
	tests := []struct {
		name string
		o    Options
		err  string
	}{
		{"no binary", Options{}, "no vigil binary"},
		{"fractional seconds", Options{VigilBin: "v", Duration: 1500 * time.Millisecond}, "whole seconds"},
		{"under a second", Options{VigilBin: "v", Duration: time.Millisecond}, "at least 1s"},
		{"skip prepare without sandbox", Options{VigilBin: "v", SkipPrepare: true}, "--sandbox"},
		{"zero threads", Options{VigilBin: "v", Threads: []int{8, 0}}, "threads 0"},
		{"zero clients", Options{VigilBin: "v", Clients: []int{0}}, "idle clients 0"},
		{"bad pinning", Options{VigilBin: "v", Pin: Pinning{Proxy: "1;rm"}}, "--pin-proxy"},
	}
	for _, tt := range tests {
		tt.o.setDefaults()
		err := tt.o.validate()
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
		}
	}
}

func TestPinning(t *testing.T) {
	for _, ok := range []string{"", "0", "1", "0-1", "0,2", "0-3,8,10-11"} {
		if err := (Pinning{Client: ok, Proxy: ok, Servers: ok}).validate(); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"a", "0-", ",1", "1 2", "-1"} {
		if err := (Pinning{Servers: bad}).validate(); err == nil || !strings.Contains(err.Error(), "--pin-servers") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
	if got := (Pinning{Client: "0", Servers: "0-1"}).String(); got != "client 0, servers 0-1" {
		t.Errorf("String = %q", got)
	}
	if (Pinning{}).String() != "none" || (Pinning{}).Any() {
		t.Error("zero pinning is not none")
	}
	bin, args := tasksetWrap("1", "sysbench", "run")
	if bin != "taskset" || strings.Join(args, " ") != "-c 1 sysbench run" {
		t.Errorf("tasksetWrap = %s %q", bin, args)
	}
	if bin, args := tasksetWrap("", "sysbench", "run"); bin != "sysbench" || len(args) != 1 {
		t.Errorf("unpinned = %s %q", bin, args)
	}
}
