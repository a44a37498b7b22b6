package bench

import (
	"fmt"
	"strings"
)

// HAProxyMaxConn bounds HAProxy's connections; each needs two descriptors
// (client and server side) and HAProxy refuses to start, silently when
// backgrounded, if the open-file limit cannot cover them.
const HAProxyMaxConn = 4096

// HAProxyConfig is a TCP pass-through from listen to one backend: the
// baseline of a proxy that does no MySQL work at all. nbthread is left to
// HAProxy (one thread per CPU), as Vigil uses every CPU too.
func HAProxyConfig(listen, backend string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by vigil bench: a TCP pass-through to the primary.
global
    maxconn %d

defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h

frontend mysql
    bind %s
    default_backend primary

backend primary
    server primary %s
`, HAProxyMaxConn, listen, backend)
	return b.String()
}
