package frontend

import (
	"bytes"
	"testing"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

func TestStmtResult(t *testing.T) {
	var r stmtResult
	r.begin()
	if r.idx != -1 || r.err != 0 || r.server != "" || r.rows != 0 {
		t.Fatalf("begin: %+v", r)
	}
	r.note("db2", 1, outcome{err: mysqlproto.NewError(1062, "23000", "dup")})
	if r.err != 1062 || r.errMsg != "dup" || r.server != "db2" || r.idx != 1 {
		t.Errorf("error: %+v", r)
	}
	// A retry that succeeded: the earlier attempt's error is not the outcome.
	r.note("db1", 0, outcome{rows: 5, affected: 9})
	if r.err != 0 || r.errMsg != "" || r.rows != 5 || r.idx != 0 {
		t.Errorf("retry: %+v (rows sent count over affected)", r)
	}
	r.note("db1", 0, outcome{affected: 3})
	if r.rows != 3 {
		t.Errorf("a write: rows %d, want the 3 affected", r.rows)
	}
}

func TestReplyCapture(t *testing.T) {
	var c replyCapture
	c.start(10)
	c.frame([]byte("abcd"))
	c.stripped(3, []byte("xy"))
	want := append([]byte("abcd"), 2, 0, 0, 3, 'x', 'y')
	if !c.on || !bytes.Equal(c.buf, want) {
		t.Fatalf("captured %q (on %v), want %q", c.buf, c.on, want)
	}
	if got := c.end(false); got != nil || c.on {
		t.Errorf("end after a failed statement returned %q", got)
	}
	c.start(10)
	c.frame([]byte("abcd"))
	if got := c.end(true); !bytes.Equal(got, []byte("abcd")) {
		t.Errorf("end: %q", got)
	}
	c.start(10)
	c.frame([]byte("0123456789A")) // over max: abandoned
	if c.on || len(c.buf) != 0 || c.end(true) != nil {
		t.Error("a reply over max was kept")
	}
}
