package frontend

import "testing"

func TestStmtRegistry(t *testing.T) {
	var r stmtRegistry
	if r.get(1) != nil {
		t.Fatal("an empty registry found statement 1")
	}
	r.close(1) // an unknown id: no reply, no effect
	if r.nextID() != 1 {
		t.Fatalf("first id %d, want 1", r.nextID())
	}
	a, b := &clientStmt{query: "SELECT 1"}, &clientStmt{query: "SELECT 2"}
	want := r.nextID()
	r.add(a)
	if a.id != want || r.get(a.id) != a {
		t.Fatalf("add: id %d (announced %d), get %p", a.id, want, r.get(a.id))
	}
	r.add(b)
	if b.id != 2 || r.get(2) != b {
		t.Fatalf("second add: id %d", b.id)
	}
	r.close(a.id)
	if r.get(a.id) != nil || r.get(b.id) != b {
		t.Fatal("close removed the wrong statement")
	}
	// Ids are not reused, after a close or a reset.
	c := &clientStmt{}
	r.add(c)
	if c.id != 3 {
		t.Errorf("id after a close: %d, want 3", c.id)
	}
	r.clear()
	if r.get(b.id) != nil || r.get(c.id) != nil {
		t.Error("clear kept statements")
	}
	d := &clientStmt{}
	r.add(d)
	if d.id != 4 {
		t.Errorf("id after clear: %d, want 4", d.id)
	}
}

func TestStmtRegistryHeld(t *testing.T) {
	var r stmtRegistry
	for _, st := range []*clientStmt{{cursor: true}, {longData: true}, {cursor: true, longData: true}, {}} {
		r.add(st)
	}
	if cur, long := r.held(); cur != 2 || long != 2 {
		t.Errorf("held: %d cursors, %d long data; want 2, 2", cur, long)
	}
	r.close(1)
	r.close(3)
	if cur, long := r.held(); cur != 0 || long != 1 {
		t.Errorf("held after closes: %d cursors, %d long data; want 0, 1", cur, long)
	}
	// A statement whose long data or cursor is set later counts once
	// noteHeld is told (the execute and send-long-data paths do).
	r.close(2)
	if cur, long := r.held(); cur != 0 || long != 0 {
		t.Errorf("held with none left: %d, %d", cur, long)
	}
	e := &clientStmt{}
	r.add(e)
	e.longData = true
	r.noteHeld(e)
	if cur, long := r.held(); cur != 0 || long != 1 {
		t.Errorf("held after long data: %d cursors, %d long data; want 0, 1", cur, long)
	}
}
