package agent

import (
	"io"
	"testing"
)

// SyncBuffer lets the integration tests (package agent_test) collect
// audit lines with the same locked buffer as the unit tests.
type SyncBuffer = syncBuffer

// ServeTest runs an agent on 127.0.0.1:0 until the test ends and returns
// its address.
func ServeTest(t *testing.T, cfg *Config, audit io.Writer) string {
	_, addr := serveTest(t, cfg, audit)
	return addr
}
