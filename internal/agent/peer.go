package agent

// Agent to agent streams. Vigil relaying a clone's stream decrypts and
// encrypts every byte once more than the stream needs, and its process
// competes with mariadb-backup and mbstream for the CPU (measured: 10.1
// CPU-seconds per GB where the raw pipe takes 4.3). So the target's agent
// pulls the stream from the donor's agent itself, when both can:
//
//   - Vigil asks the donor's agent for a ticket (POST /v1/backup/ticket,
//     over its own mutual TLS, with its token): 32 random bytes, valid
//     for one backup within a minute, carrying the rate Vigil chose.
//   - Vigil asks the target's agent to restore from the donor's agent
//     (POST /v1/restore?from=HOST:PORT, the ticket in a header).
//   - The target's agent connects to the donor's agent with its own
//     certificate as client certificate (vigil agent init gives agents
//     both usages), verifying the donor's certificate against its CA, and
//     pulls POST /v1/backup with the ticket.
//
// An agent's certificate is told from Vigil's by its server usage. It
// gets nothing but that one ticketed backup: no status, no restore, no
// stop, no second backup with the same ticket. Vigil reads the progress
// from the target's status.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync/atomic"
	"time"
)

// ticketTTL is how long a ticket waits for its pull.
const ticketTTL = time.Minute

// ticket is the one backup a peer agent may pull (Server.ticket).
type ticket struct {
	value   string
	rate    int64
	expires time.Time
}

// peerCertificate reports whether the verified client certificate of r is
// an agent's (valid for server authentication too): a peer pulling a
// ticketed backup, never Vigil.
func peerCertificate(r *http.Request) bool {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return false
	}
	return slices.Contains(r.TLS.VerifiedChains[0][0].ExtKeyUsage, x509.ExtKeyUsageServerAuth)
}

// CheckVigilCertificate refuses a certificate for Vigil itself that an
// agent would take for another agent's (it has the server usage): the
// agents of this version would answer its every call with 403.
func CheckVigilCertificate(certFile, keyFile string) error {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("agent client certificate: %w", err)
	}
	leaf := c.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return fmt.Errorf("agent client certificate: %w", err)
		}
	}
	if slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return fmt.Errorf("agents.cert %s is also for server authentication: agents take such a certificate for another agent's and refuse it everything but a ticketed backup; issue Vigil a certificate for client authentication only (vigil agent init writes one: vigil.crt)", certFile)
	}
	return nil
}

// clientCapable reports whether the agent's own certificate may serve
// as a client certificate to pull from a peer, which must recognise it
// as an agent's: both usages, named.
func clientCapable(c tls.Certificate) bool {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	return leaf != nil && slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) && slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
}

// issueTicket replaces any earlier ticket by a new one for a backup at
// rate (bytes/s, 0: the agent's own limit).
func (s *Server) issueTicket(rate int64) (TicketResult, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return TicketResult{}, err
	}
	t := ticket{value: base64.RawURLEncoding.EncodeToString(b), rate: rate, expires: time.Now().Add(ticketTTL)}
	s.mu.Lock()
	s.ticket = t
	s.mu.Unlock()
	return TicketResult{Ticket: t.value, Expires: t.expires}, nil
}

// useTicket consumes the live ticket when v is it, and returns its rate.
func (s *Server) useTicket(v string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ticket
	if t.value == "" || v == "" || time.Now().After(t.expires) || subtle.ConstantTimeCompare([]byte(v), []byte(t.value)) != 1 {
		return 0, false
	}
	s.ticket = ticket{}
	return t.rate, true
}

func (s *Server) handleTicket(_ context.Context, c *call, _ http.ResponseWriter, r *http.Request) (any, error) {
	rate, err := queryInt(r, "rate")
	if err != nil {
		return nil, err
	}
	c.attrs = append(c.attrs, "rate", rate)
	return s.issueTicket(rate)
}

// pulledStream is a donor agent's backup stream as the target's agent
// reads it: a stream that ends without the donor's "ok" is an error, as
// in Vigil's relay (Client.Backup).
type pulledStream struct {
	resp *http.Response
	from string
	c    *Client
	err  error // the first error reading it, the donor's failure included
}

func (p *pulledStream) Read(b []byte) (int, error) {
	n, err := p.resp.Body.Read(b)
	switch {
	case err == io.EOF:
		if p.resp.Trailer.Get(TrailerOK) != "ok" {
			msg := p.resp.Trailer.Get(TrailerErr)
			if msg == "" {
				msg = "the donor's agent sent no outcome (the stream may be incomplete)"
			}
			p.err = fmt.Errorf("backup failed: %s", msg)
			return n, p.err
		}
	case err != nil:
		p.err = err
	}
	return n, err
}

func (p *pulledStream) Close() {
	_ = p.resp.Body.Close()
	p.c.Close()
}

// pull opens the backup stream of the donor's agent at from with the
// ticket, this agent's certificate as the client's.
func (s *Server) pull(ctx context.Context, from, tk string) (*pulledStream, error) {
	if _, _, err := net.SplitHostPort(from); err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: fmt.Sprintf("from=%q is not host:port", from)}
	}
	if !s.peerPull {
		return nil, &Error{Status: http.StatusConflict, Code: CodeBadRequest,
			Message: "this agent's certificate is for server authentication only, so it cannot pull from another agent (a certificate from vigil agent init of this version has both usages)"}
	}
	if tk == "" {
		return nil, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: "a restore from another agent needs the ticket its agent issued (" + HeaderTicket + ")"}
	}
	c, err := NewClient(ClientConfig{Addr: from, CA: s.cfg.TLS.CA, Cert: s.cfg.TLS.Cert, Key: s.cfg.TLS.Key})
	if err != nil {
		// Its own files (rotated since it started?): Vigil can relay.
		return nil, &Error{Status: http.StatusBadGateway, Code: CodeNoPeer, Message: fmt.Sprintf("this agent cannot be a client of the donor's agent %s: %v", from, err)}
	}
	resp, err := c.openBackup(ctx, nil, tk)
	if err != nil {
		c.Close()
		var ae *Error
		if errors.As(err, &ae) && ae.Code != CodeUnauthorized && ae.Code != CodeForbidden {
			// The donor's agent answered and refused the backup itself
			// (busy, its server down): another donor, not a relay.
			return nil, &Error{Status: http.StatusBadGateway, Code: CodeDonorFailed, Message: fmt.Sprintf("the donor's agent %s refused the backup: %v", from, err)}
		}
		// Not reached, not trusted (another CA), or the ticket refused:
		// nothing streamed, and Vigil can relay instead.
		return nil, &Error{Status: http.StatusBadGateway, Code: CodeNoPeer, Message: fmt.Sprintf("the donor's agent %s: %v", from, err)}
	}
	return &pulledStream{resp: resp, from: from, c: c}, nil
}

// progress is the running restore's progress (Status.Restore).
type progress struct {
	phase atomic.Value // string
	bytes atomic.Int64
	from  string
	start time.Time
	// streamed is when the extract ended (unix nanoseconds, 0: not yet).
	streamed atomic.Int64
}

func (s *Server) beginRestore(from string) *progress {
	p := &progress{from: from, start: time.Now()}
	p.phase.Store(RestoreReceiving)
	s.mu.Lock()
	s.progress = p
	s.mu.Unlock()
	return p
}

func (s *Server) endRestore() {
	s.mu.Lock()
	s.progress = nil
	s.mu.Unlock()
}

// setPhase moves the running restore's phase.
func (s *Server) setPhase(phase string) {
	s.mu.Lock()
	p := s.progress
	s.mu.Unlock()
	if p != nil {
		if phase == RestorePreparing {
			p.streamed.CompareAndSwap(0, time.Now().UnixNano())
		}
		p.phase.Store(phase)
	}
}

// streamSeconds is the time from the restore's start to the end of its
// extract, 0 before that.
func (p *progress) streamSeconds() float64 {
	if e := p.streamed.Load(); e != 0 {
		return time.Unix(0, e).Sub(p.start).Seconds()
	}
	return 0
}

func (s *Server) restoreProgress() *RestoreProgress {
	s.mu.Lock()
	p := s.progress
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	return &RestoreProgress{Phase: p.phase.Load().(string), Bytes: p.bytes.Load(), From: p.from}
}

// handleProgress answers the running restore's progress alone (null when
// none runs): what a clone's Vigil polls while the target's agent pulls,
// without the status's datadir walk and server login. Audited only when
// refused.
func (s *Server) handleProgress(context.Context, *call, http.ResponseWriter, *http.Request) (any, error) {
	return s.restoreProgress(), nil
}

// countingReader counts what a restore received.
type countingReader struct {
	r io.Reader
	p *progress
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.bytes.Add(int64(n))
	return n, err
}
