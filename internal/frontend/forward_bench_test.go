package frontend

import (
	"database/sql"
	"fmt"
	"strconv"
	"sync"
	"testing"
)

var (
	benchRowsMu  sync.Mutex
	benchRowsSet = map[int][][]string{}
)

// benchRows is n rows of the fake backend's SELECT ROWS n, built once.
func benchRows(n int) [][]string {
	benchRowsMu.Lock()
	defer benchRowsMu.Unlock()
	if r, ok := benchRowsSet[n]; ok {
		return r
	}
	r := make([][]string, n)
	for i := range r {
		r[i] = []string{strconv.Itoa(i), "some value of a row"}
	}
	benchRowsSet[n] = r
	return r
}

// BenchmarkForwardRows streams a 1,000-row result set from a fake server
// through the proxy to a client: forward's per-row path (relay.rows) is
// most of the work. allocs/op counts the whole process (client driver and
// fake server included), so compare it across changes, not against zero.
func BenchmarkForwardRows(b *testing.B) {
	tp := newTestProxy(b, nil)
	db, err := sql.Open("mysql", fmt.Sprintf("app:secret@tcp(%s)/?timeout=5s", tp.addr))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	benchRows(1000)
	var id, v sql.RawBytes
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rows, err := db.Query("SELECT ROWS 1000")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(&id, &v); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := rows.Err(); err != nil || n != 1000 {
			b.Fatal(n, err)
		}
		rows.Close()
	}
}
