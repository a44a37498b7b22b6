package agent

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a running agent: the operations of its Config behind an
// mTLS listener.
type Server struct {
	cfg   *Config
	audit *slog.Logger
	tls   *tls.Config

	// peerPull: the agent's certificate is valid for client
	// authentication, so it can pull from another agent (peer.go).
	peerPull bool

	// mu guards busy (the one mutating operation running, "" when
	// none), the ticket a peer may pull a backup with, and the running
	// restore's progress.
	mu       sync.Mutex
	busy     string
	ticket   ticket
	progress *progress
}

// NewServer loads the TLS files of cfg. Audit lines (JSON) go to audit.
func NewServer(cfg *Config, audit io.Writer) (*Server, error) {
	tc, err := serverTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, audit: slog.New(slog.NewJSONHandler(audit, nil)), tls: tc, peerPull: clientCapable(tc.Certificates[0])}, nil
}

// serverTLS requires and verifies a client certificate signed by the CA.
func serverTLS(t TLS) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("agent tls: %w", err)
	}
	pool, err := loadCA(t.CA)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
		// HTTP/1.1 only: one stream per connection, trailers work, and no
		// HTTP/2 flow-control window sits between the pipe and the peer.
		NextProtos: []string{"http/1.1"},
	}, nil
}

func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("agent tls ca: no certificate in %s", path)
	}
	return pool, nil
}

// Serve answers on ln (wrapped in TLS here) until ctx ends, then shuts
// down: running operations get their context cancelled.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(handshakeAuditor{s}, "", 0),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	err := hs.Serve(tls.NewListener(ln, s.tls))
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// handshakeAuditor turns net/http's "TLS handshake error" lines (a
// missing client certificate, one from another CA) into audit lines: a
// refused connection never reaches a handler.
type handshakeAuditor struct{ s *Server }

func (h handshakeAuditor) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if rest, ok := strings.CutPrefix(line, "http: TLS handshake error from "); ok {
		remote, msg, _ := strings.Cut(rest, ": ")
		h.s.audit.Warn("agent", "op", "connect", "outcome", "refused", "remote", remote, "error", msg)
	} else {
		h.s.audit.Warn("agent", "op", "http", "outcome", "error", "error", line)
	}
	return len(p), nil
}

// Handler serves the API. It also checks the client certificate itself,
// so that it refuses even behind a listener without TLS.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathStatus, s.op("status", false, s.handleStatus))
	mux.HandleFunc("POST "+PathStop, s.op("stop", true, s.handleStop))
	mux.HandleFunc("POST "+PathStart, s.op("start", true, s.handleStart))
	mux.HandleFunc("POST "+PathBackup, s.op("backup", true, s.handleBackup))
	mux.HandleFunc("POST "+PathTicket, s.op("ticket", false, s.handleTicket))
	mux.HandleFunc("GET "+PathProgress, s.opQuiet("progress", s.handleProgress))
	mux.HandleFunc("POST "+PathRestore, s.op("restore", true, s.handleRestore))
	mux.HandleFunc("POST "+PathCleanup, s.op("cleanup", true, s.handleCleanup))
	return mux
}

// call is one request's audit record, filled in by the handler.
type call struct {
	bytes int64
	attrs []any
	// streamed: the handler already wrote its response.
	streamed bool
	// failed: the operation ran and failed, whatever its error's code
	// (a restore that filled the disk is no_space, but not a refusal).
	failed bool
	// peer: the client is another agent with a valid ticket, whose rate
	// is ticketRate.
	peer       bool
	ticketRate int64
}

type opFunc func(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request) (any, error)

// op wraps a handler with authentication, the one-mutation lock and the
// audit line.
func (s *Server) op(name string, mutating bool, fn opFunc) http.HandlerFunc {
	return s.opAudited(name, mutating, false, fn)
}

// opQuiet is op for a read polled several times a second: audited only
// when refused or failed.
func (s *Server) opQuiet(name string, fn opFunc) http.HandlerFunc {
	return s.opAudited(name, false, true, fn)
}

func (s *Server) opAudited(name string, mutating, quiet bool, fn opFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		who := clientName(r)
		c := &call{}
		audit := func(outcome string, err error) {
			attrs := []any{"op", name, "who", who, "remote", r.RemoteAddr, "outcome", outcome,
				"bytes", c.bytes, "duration_ms", time.Since(t0).Milliseconds()}
			attrs = append(attrs, c.attrs...)
			if err != nil {
				var ae *Error
				if errors.As(err, &ae) {
					attrs = append(attrs, "code", ae.Code)
				}
				attrs = append(attrs, "error", err.Error())
				s.audit.Warn("agent", attrs...)
				return
			}
			if !quiet {
				s.audit.Info("agent", attrs...)
			}
		}
		if who == "" {
			err := &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "no verified client certificate"}
			audit("refused", err)
			writeError(w, err)
			return
		}
		if peerCertificate(r) {
			// Another agent: one ticketed backup and nothing else. The
			// ticket stands for the token (Vigil asked for it with its
			// own).
			c.peer = true
			c.attrs = append(c.attrs, "peer", true)
			var err error
			if name != "backup" {
				err = &Error{Status: http.StatusForbidden, Code: CodeForbidden,
					Message: "an agent's certificate may only pull a backup, with a ticket Vigil asked for"}
			} else if c.ticketRate, c.peer = s.useTicket(r.Header.Get(HeaderTicket)); !c.peer {
				err = &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized,
					Message: "no valid backup ticket (missing, already used, replaced by a newer one, or older than " + ticketTTL.String() + ")"}
			}
			if err != nil {
				audit("refused", err)
				writeError(w, err)
				return
			}
		} else if !s.tokenOK(r) {
			err := &Error{Status: http.StatusUnauthorized, Code: CodeUnauthorized, Message: "missing or wrong bearer token"}
			audit("refused", err)
			writeError(w, err)
			return
		}
		if mutating {
			if other := s.acquire(name); other != "" {
				err := &Error{Status: http.StatusConflict, Code: CodeBusy,
					Message: fmt.Sprintf("another operation (%s) is running on this agent; one at a time: retry when it ends", other)}
				audit("refused", err)
				writeError(w, err)
				return
			}
			defer s.release()
		}
		res, err := fn(r.Context(), c, w, r)
		if err != nil {
			var ae *Error
			outcome := "failed"
			if errors.As(err, &ae) && ae.Code != CodeFailed && !c.failed {
				outcome = "refused"
			}
			audit(outcome, err)
			if !c.streamed {
				writeError(w, err)
			}
			return
		}
		audit("ok", nil)
		if !c.streamed {
			writeJSON(w, http.StatusOK, res)
		}
	}
}

// clientName is the subject of the verified client certificate, "" when
// there is none.
func clientName(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ""
	}
	return r.TLS.VerifiedChains[0][0].Subject.String()
}

func (s *Server) tokenOK(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(s.cfg.Token)) == 1
}

// acquire takes the one-mutation slot for op; it returns the name of the
// operation holding it when it is taken.
func (s *Server) acquire(op string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy != "" {
		return s.busy
	}
	s.busy = op
	return ""
}

func (s *Server) release() {
	s.mu.Lock()
	s.busy = ""
	s.mu.Unlock()
}

func (s *Server) busyOp() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var ae *Error
	if !errors.As(err, &ae) {
		ae = &Error{Status: http.StatusInternalServerError, Code: CodeFailed, Message: err.Error()}
	}
	writeJSON(w, ae.Status, ae)
}

func (s *Server) handleStatus(ctx context.Context, _ *call, _ http.ResponseWriter, _ *http.Request) (any, error) {
	return s.status(ctx), nil
}

func (s *Server) handleStop(ctx context.Context, _ *call, _ http.ResponseWriter, _ *http.Request) (any, error) {
	if err := s.stopServer(ctx); err != nil {
		return nil, err
	}
	return s.status(ctx), nil
}

func (s *Server) handleStart(ctx context.Context, _ *call, _ http.ResponseWriter, _ *http.Request) (any, error) {
	if err := s.startServer(ctx); err != nil {
		return nil, err
	}
	return s.status(ctx), nil
}

func (s *Server) handleCleanup(ctx context.Context, c *call, _ http.ResponseWriter, _ *http.Request) (any, error) {
	removed, err := s.cleanup()
	c.attrs = append(c.attrs, "removed", removed)
	if err != nil {
		return nil, err
	}
	return CleanupResult{Removed: removed}, nil
}

// queryInt reads a non-negative integer query parameter (0 when absent).
func queryInt(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &Error{Status: http.StatusBadRequest, Code: CodeBadRequest, Message: fmt.Sprintf("%s=%q is not a non-negative integer", name, v)}
	}
	return n, nil
}

func (s *Server) handleBackup(ctx context.Context, c *call, w http.ResponseWriter, r *http.Request) (any, error) {
	rate, err := queryInt(r, "rate")
	if err != nil {
		return nil, err
	}
	if c.peer {
		rate = c.ticketRate // Vigil's choice, not the peer's
	}
	if s.cfg.MaxRate > 0 && (rate == 0 || rate > s.cfg.MaxRate) {
		rate = s.cfg.MaxRate
	}
	c.attrs = append(c.attrs, "rate", rate)
	args, cleanup, err := s.backupCommand(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// From here on the status is 200 and the outcome travels in the
	// trailers: a stream is a success only with Vigil-Backup-Status: ok.
	w.Header().Set("Trailer", TrailerOK+", "+TrailerErr)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	c.streamed = true
	n, err := s.runBackup(ctx, args, newThrottledWriter(ctx, w, rate))
	c.bytes = n
	if err != nil {
		w.Header().Set(TrailerErr, oneLine(err.Error()))
		return nil, err
	}
	w.Header().Set(TrailerOK, "ok")
	return nil, nil
}

func (s *Server) handleRestore(ctx context.Context, c *call, _ http.ResponseWriter, r *http.Request) (any, error) {
	expected, err := queryInt(r, "expected_size")
	if err != nil {
		return nil, err
	}
	from := r.URL.Query().Get("from")
	p := s.beginRestore(from)
	defer s.endRestore()
	var body io.Reader = r.Body
	var ps *pulledStream
	if from != "" {
		c.attrs = append(c.attrs, "from", from)
		// The refusals restore checks first, before the donor's backup
		// starts for nothing (restore checks them again).
		var running bool
		if err := s.refuseUnsafe(ctx, &running); err != nil {
			return nil, err
		}
		if ps, err = s.pull(ctx, from, r.Header.Get(HeaderTicket)); err != nil {
			return nil, err
		}
		defer ps.Close()
		body = ps
	}
	res, err := s.restore(ctx, countingReader{body, p}, expected)
	res.StreamSeconds = p.streamSeconds()
	if err != nil && ps != nil && ps.err != nil && res.OldDatadir == "" && ctx.Err() == nil {
		err = &Error{Status: http.StatusBadGateway, Code: CodeDonorFailed,
			Message: fmt.Sprintf("the stream from the donor's agent %s failed after %d bytes: %v; nothing was swapped", from, res.BytesReceived, ps.err)}
	}
	c.bytes = res.BytesReceived
	var ae *Error
	c.failed = errors.As(err, &ae) && (ae.Code == CodeNoSpace || ae.Code == CodeDonorFailed) && res.BytesReceived > 0
	c.attrs = append(c.attrs, "gtid", res.GTID, "old_datadir", res.OldDatadir)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// oneLine makes s fit in a header value.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 2000 {
		s = s[:2000] + "..."
	}
	return s
}
