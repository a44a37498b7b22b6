package frontend

import (
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/backend"
)

func TestInflightListing(t *testing.T) {
	var f inflight
	var in SessionInfo
	f.show(&in)
	if in.User != "" || in.Command != "" || in.Server != "" {
		t.Fatalf("idle, before login: %+v", in)
	}
	f.setUser("app")
	f.begin([]byte("SELECT * FROM t WHERE id = 42"), time.Now().Add(-2*time.Second))
	f.running.Store(&backend.Conn{Server: "db1"})
	in = SessionInfo{}
	f.show(&in)
	if in.User != "app" || in.Server != "db1" || in.Command != "SELECT * FROM t WHERE id = ?" || in.Seconds < 2 {
		t.Errorf("running: %+v (the literal masked, 2 s or more)", in)
	}
	if f.userName() != "app" {
		t.Errorf("userName %q", f.userName())
	}
	f.running.Store(nil)
	f.end()
	in = SessionInfo{}
	f.show(&in)
	if in.Command != "" || in.Seconds != 0 || in.Server != "" || in.User != "app" {
		t.Errorf("after the statement: %+v", in)
	}
	long := make([]byte, 2*curTextMax)
	for i := range long {
		long[i] = 'x'
	}
	f.begin(long, time.Now())
	if len(f.text) != curTextMax {
		t.Errorf("kept %d bytes of a long statement, want %d", len(f.text), curTextMax)
	}
}
