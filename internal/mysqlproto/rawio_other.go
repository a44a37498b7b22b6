//go:build !linux || race || msan || asan

package mysqlproto

import "net"

// rawIO exists on Linux only, and not in race or sanitizer builds
// (rawio_linux.go); elsewhere connections use net.Conn's Read and Write.
type rawIO struct{}

func newRawIO(net.Conn) *rawIO { return nil }

func (*rawIO) read([]byte) (int, error)                         { panic("unreachable") }
func (*rawIO) write([]byte) (int, error)                        { panic("unreachable") }
func (*rawIO) readIdle(*Conn) (int, error)                      { panic("unreachable") }
func (*rawIO) flushAwait(_, _ []byte) (int, bool, error, error) { panic("unreachable") }
