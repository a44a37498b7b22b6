package frontend

import (
	"testing"
	"time"
)

func TestRYWState(t *testing.T) {
	var r rywState
	r.wrote("0-1-5", 2)
	if r.gtid != "0-1-5" || !r.fresh || !r.seenOn(2) || r.seenOn(0) {
		t.Fatalf("after a write on server 2: %+v", r)
	}
	r.markSeen(0)
	if !r.seenOn(0) || !r.seenOn(2) {
		t.Errorf("markSeen: %b", r.seen)
	}
	if r.follow("0-1-5") || !r.seenOn(0) {
		t.Error("following the same GTID forgot where it was seen")
	}
	if !r.follow("0-1-9") || r.seenOn(0) || r.seenOn(2) || r.gtid != "0-1-9" {
		t.Errorf("following a newer GTID: %+v", r)
	}
	r.lastWrite = time.Now()
	r.forget()
	if r.gtid != "" || r.seen != 0 || !r.lastWrite.IsZero() || !r.fresh {
		t.Errorf("forget: %+v (fresh is the running statement's and stays)", r)
	}
	r.wrote("0-1-10", 63)
	if !r.seenOn(63) || r.seenOn(62) {
		t.Errorf("server 63: %b", r.seen)
	}
}
