package frontend

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigil-db/vigil/internal/mysqlproto"
)

// FuzzSessionCommands sends one arbitrary command packet through a
// logged-in session of a real frontend (with a fake server behind it):
// whatever the bytes, the session answers or closes, never panics, and
// the listener keeps serving.
func FuzzSessionCommands(f *testing.F) {
	for _, seed := range [][]byte{
		{mysqlproto.ComQuery, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1'},
		{mysqlproto.ComPing},
		{mysqlproto.ComInitDB, 's', 'h', 'o', 'p'},
		{mysqlproto.ComStmtPrepare, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '?'},
		{mysqlproto.ComStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0},
		{mysqlproto.ComStmtClose, 1, 0, 0, 0},
		{mysqlproto.ComStmtSendLongData, 1, 0, 0, 0, 0, 0, 'x'},
		{mysqlproto.ComStmtFetch, 1, 0, 0, 0, 10, 0, 0, 0},
		{mysqlproto.ComChangeUser, 'a', 'p', 'p', 0, 0},
		{mysqlproto.ComResetConnection},
		{mysqlproto.ComSetOption, 1, 0},
		{mysqlproto.ComFieldList, 't', 0},
		{mysqlproto.ComStatistics},
		{mysqlproto.ComQuit},
		{0xfe},
		{},
	} {
		f.Add(seed)
	}
	tp := newTestProxy(f, nil)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, _, err := mysqlproto.Dial(ctx, &mysqlproto.DialConfig{Addr: tp.addr, User: "app", Password: "secret"})
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		defer c.Close()
		_ = c.NetConn().SetDeadline(time.Now().Add(3 * time.Second))
		c.Seq = 0
		if err := c.WritePacket(pkt); err != nil {
			return
		}
		if err := c.Flush(); err != nil {
			return
		}
		// Read whatever comes back until the session goes quiet or ends.
		for range 64 {
			_ = c.NetConn().SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if _, err := c.ReadPacket(); err != nil {
				var ne interface{ Timeout() bool }
				if errors.As(err, &ne) && ne.Timeout() {
					break
				}
				break
			}
		}
		if n := tp.srv.Stats.Panics.Load(); n != 0 {
			t.Fatalf("a session panicked on %x", pkt)
		}
	})
}
