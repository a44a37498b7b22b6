package bench

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaultsAndValidate(t *testing.T) {
	o := Options{VigilBin: "/bin/true"}
	o.setDefaults()
	if o.Threads != 32 || o.Duration != 20*time.Second || o.Reps != 3 || o.Warmup != 2*time.Second ||
		o.Tables != 4 || o.TableSize != 20000 || o.OutDir != "bench/out" || len(o.Scenarios) != 2 || o.Progress == nil {
		t.Errorf("defaults: %+v", o)
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
	}
	for _, tt := range tests {
		tt.o.setDefaults()
		err := tt.o.validate()
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
		}
	}
}
