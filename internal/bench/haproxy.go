package bench

import (
	"fmt"
	"strings"
)

// HAProxyMaxConn is HAProxy's maxconn when no case needs more; each
// connection needs two descriptors (client and server side) and HAProxy
// refuses to start, silently when backgrounded, if the open-file limit
// cannot cover them.
const HAProxyMaxConn = 4096

// HAProxyMaxConnFor is the maxconn for want connections under an
// open-file limit: at least HAProxyMaxConn when the limit allows, at most
// what two descriptors per connection leave.
func HAProxyMaxConnFor(fileLimit uint64, want int) int {
	n := max(want, HAProxyMaxConn)
	if fileLimit > 0 {
		n = min(n, int((int64(fileLimit)-200)/2))
	}
	return max(n, 1)
}

// HAProxyConfig is a TCP pass-through from listen to one backend: the
// baseline of a proxy that does no MySQL work at all. nbthread is left to
// HAProxy (one thread per CPU), as Vigil uses every CPU too.
func HAProxyConfig(listen, backend string, maxconn int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by vigil-bench: a TCP pass-through to the primary.
global
    maxconn %d

defaults
    mode tcp
    maxconn %d
    timeout connect 5s
    timeout client 1h
    timeout server 1h

frontend mysql
    bind %s
    default_backend primary

backend primary
    server primary %s
`, maxconn, maxconn, listen, backend)
	return b.String()
}
