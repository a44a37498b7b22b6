package qcache

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func TestGetPutExpire(t *testing.T) {
	c := New(1<<20, 1<<10)
	now := time.Unix(100, 0)
	if c.Get([]byte("k"), now) != nil {
		t.Fatal("hit on empty cache")
	}
	c.Put([]byte("k"), []byte("reply"), time.Second, now)
	if got := c.Get([]byte("k"), now.Add(500*time.Millisecond)); !bytes.Equal(got, []byte("reply")) {
		t.Fatalf("got %q", got)
	}
	if got := c.Get([]byte("k"), now.Add(2*time.Second)); got != nil {
		t.Fatalf("expired entry served: %q", got)
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 2 || st.Expired != 1 || st.Entries != 0 || st.Bytes != 0 {
		t.Errorf("stats %+v", st)
	}
	if c.Put([]byte("big"), make([]byte, 2000), time.Second, now) {
		t.Error("entry over max_entry_size stored")
	}
}

func TestLRUBound(t *testing.T) {
	c := New(10*(100+overhead+2), 1<<10)
	now := time.Unix(0, 0)
	for i := range 10 {
		c.Put(fmt.Appendf(nil, "k%d", i), make([]byte, 100), time.Hour, now)
	}
	c.Get([]byte("k0"), now) // k0 becomes most recent; k1 is the oldest
	c.Put([]byte("kx"), make([]byte, 100), time.Hour, now)
	if c.Get([]byte("k1"), now) != nil {
		t.Error("least recently used entry kept")
	}
	if c.Get([]byte("k0"), now) == nil {
		t.Error("recently used entry evicted")
	}
	st := c.Stats()
	if st.Bytes > st.MaxBytes || st.Evictions != 1 {
		t.Errorf("stats %+v", st)
	}
	c.SetLimits(0, 0)
	if c.Stats().Entries != 0 {
		t.Error("shrinking the limit kept entries")
	}
}

func BenchmarkGetHit(b *testing.B) {
	c := New(1<<20, 1<<16)
	key := []byte("c1\x00app\x00sbtest\x00SELECT c FROM sbtest1 WHERE id=1")
	now := time.Now()
	c.Put(key, make([]byte, 200), time.Hour, now)
	b.ReportAllocs()
	for b.Loop() {
		if c.Get(key, now) == nil {
			b.Fatal("miss")
		}
	}
}
