package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ClientConfig says how Vigil reaches one agent.
type ClientConfig struct {
	// Addr is the agent's host:port.
	Addr string
	// CA verifies the agent's certificate; Cert and Key are Vigil's client
	// certificate (PEM files, e.g. from vigil agent init).
	CA, Cert, Key string
	// Token is sent as a bearer token when set.
	Token string
	// ServerName overrides the name checked in the agent's certificate
	// (default: Addr's host).
	ServerName string
}

// Client calls one agent. Its methods are safe for concurrent use; the
// agent itself runs one mutating operation at a time.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient loads the certificates and builds a client.
func NewClient(c ClientConfig) (*Client, error) {
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, fmt.Errorf("agent client certificate: %w", err)
	}
	pool, err := loadCA(c.CA)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("agent address %q: %w", c.Addr, err)
	}
	name := c.ServerName
	if name == "" {
		name = host
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			RootCAs:      pool,
			ServerName:   name,
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"http/1.1"},
		},
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     time.Minute,
	}
	return &Client{base: "https://" + c.Addr, token: c.Token, http: &http.Client{Transport: tr}}, nil
}

// Close drops idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// openBackup starts a backup stream: the response's body, its outcome in
// the trailers. A peer agent sends the ticket Vigil gave it.
func (c *Client) openBackup(ctx context.Context, q url.Values, ticket string) (*http.Response, error) {
	var hdr http.Header
	if ticket != "" {
		hdr = http.Header{HeaderTicket: {ticket}}
	}
	return c.requestWith(ctx, http.MethodPost, PathBackup, q, http.NoBody, hdr)
}

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Response, error) {
	return c.requestWith(ctx, method, path, q, body, nil)
}

func (c *Client) requestWith(ctx context.Context, method, path string, q url.Values, body io.Reader, hdr http.Header) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	ae := &Error{Status: resp.StatusCode}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err := json.Unmarshal(data, ae); err != nil || ae.Message == "" {
		ae.Code = CodeFailed
		ae.Message = strings.TrimSpace(string(data))
	}
	return ae
}

// call sends a request without a stream and decodes the JSON answer.
func (c *Client) call(ctx context.Context, method, path string, body io.Reader, q url.Values, out any) error {
	resp, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out); err != nil {
		return fmt.Errorf("agent %s: decode answer: %w", path, err)
	}
	return nil
}

// Status is what the agent sees on its host now.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodGet, PathStatus, nil, nil, &st)
	return st, err
}

// Stop stops the server with the agent's configured command and waits
// until it is gone.
func (c *Client) Stop(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodPost, PathStop, nil, nil, &st)
	return st, err
}

// Start starts the server with the agent's configured command and waits
// until it answers.
func (c *Client) Start(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodPost, PathStart, nil, nil, &st)
	return st, err
}

// BackupOptions tune a backup stream.
type BackupOptions struct {
	// Rate limits the stream in bytes per second (0: none; the agent's
	// max_rate caps it either way).
	Rate int64
}

// Backup streams a backup of the agent's server (xbstream) into w and
// returns its size. It returns an error unless the agent reported that
// mariadb-backup succeeded: a cut or failed stream is never a success.
func (c *Client) Backup(ctx context.Context, w io.Writer, o BackupOptions) (int64, error) {
	q := url.Values{}
	if o.Rate > 0 {
		q.Set("rate", strconv.FormatInt(o.Rate, 10))
	}
	resp, err := c.openBackup(ctx, q, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := copyBlocks(w, resp.Body, make([]byte, streamBlock))
	if err != nil {
		return n, fmt.Errorf("agent backup: stream cut after %d bytes: %w", n, err)
	}
	if resp.Trailer.Get(TrailerOK) != "ok" {
		msg := resp.Trailer.Get(TrailerErr)
		if msg == "" {
			msg = "the agent sent no outcome (the stream may be incomplete)"
		}
		return n, &Error{Status: resp.StatusCode, Code: CodeFailed, Message: "backup failed: " + msg}
	}
	return n, nil
}

// RestoreOptions tune a restore.
type RestoreOptions struct {
	// ExpectedSize, when known, lets the agent refuse early when the disk
	// lacks the space.
	ExpectedSize int64
}

// Restore sends a backup stream to the agent, which swaps it in as its
// server's datadir (see docs/lifecycle.md for the steps and what is
// refused). When r returns an error the request is aborted, and the
// agent throws the partial copy away.
func (c *Client) Restore(ctx context.Context, r io.Reader, o RestoreOptions) (RestoreResult, error) {
	q := url.Values{}
	if o.ExpectedSize > 0 {
		q.Set("expected_size", strconv.FormatInt(o.ExpectedSize, 10))
	}
	var res RestoreResult
	// io.NopCloser hides r's concrete type so the transport streams it
	// chunked instead of guessing a length.
	err := c.call(ctx, http.MethodPost, PathRestore, io.NopCloser(r), q, &res)
	return res, err
}

// Ticket asks the agent for a one-time ticket that lets another agent
// pull one backup of it at rate (bytes/s, 0: the agent's own limit).
func (c *Client) Ticket(ctx context.Context, rate int64) (TicketResult, error) {
	q := url.Values{}
	if rate > 0 {
		q.Set("rate", strconv.FormatInt(rate, 10))
	}
	var res TicketResult
	err := c.call(ctx, http.MethodPost, PathTicket, nil, q, &res)
	return res, err
}

// Progress is the running restore's progress, nil when none runs.
func (c *Client) Progress(ctx context.Context) (*RestoreProgress, error) {
	var p *RestoreProgress
	err := c.call(ctx, http.MethodGet, PathProgress, nil, nil, &p)
	return p, err
}

// RestoreFrom has the agent pull the backup stream from the donor's agent
// at from (host:port) itself, with the ticket that agent issued, and
// restore it as Restore does: the stream does not pass through the
// caller. Status.Restore shows its progress meanwhile.
func (c *Client) RestoreFrom(ctx context.Context, from, ticket string, o RestoreOptions) (RestoreResult, error) {
	q := url.Values{"from": {from}}
	if o.ExpectedSize > 0 {
		q.Set("expected_size", strconv.FormatInt(o.ExpectedSize, 10))
	}
	resp, err := c.requestWith(ctx, http.MethodPost, PathRestore, q, http.NoBody, http.Header{HeaderTicket: {ticket}})
	if err != nil {
		return RestoreResult{}, err
	}
	defer resp.Body.Close()
	var res RestoreResult
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&res); err != nil {
		return res, fmt.Errorf("agent %s: decode answer: %w", PathRestore, err)
	}
	return res, nil
}

// Cleanup deletes the old datadirs earlier restores kept aside.
func (c *Client) Cleanup(ctx context.Context) (CleanupResult, error) {
	var res CleanupResult
	err := c.call(ctx, http.MethodPost, PathCleanup, nil, nil, &res)
	return res, err
}

// errRestoreEnded is what the backup's writes get once the restore has
// returned.
var errRestoreEnded = errors.New("restore ended")

// Backuper and Restorer are the halves of a Clone (a *Client is both);
// callers wrap them to watch the stream.
type (
	Backuper interface {
		Backup(ctx context.Context, w io.Writer, o BackupOptions) (int64, error)
	}
	Restorer interface {
		Restore(ctx context.Context, r io.Reader, o RestoreOptions) (RestoreResult, error)
	}
)

// Clone streams a backup of donor's server straight into a restore on
// target, with memory bounded by the copy buffers. When the backup fails
// or is cut, the restore is aborted and target keeps its old datadir.
func Clone(parent context.Context, donor Backuper, target Restorer, bo BackupOptions, ro RestoreOptions) (RestoreResult, int64, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	pr, pw := io.Pipe()
	type backupDone struct {
		n   int64
		err error
	}
	done := make(chan backupDone, 1)
	go func() {
		n, err := donor.Backup(ctx, pw, bo)
		if err == nil {
			_ = pw.Close()
		} else {
			_ = pw.CloseWithError(err)
		}
		done <- backupDone{n, err}
	}()
	res, rerr := target.Restore(ctx, blockReader{pr}, ro)
	_ = pr.CloseWithError(errRestoreEnded)
	if rerr != nil {
		cancel()
	}
	b := <-done
	switch {
	case b.err != nil && rerr != nil && parent.Err() == nil && (errors.Is(b.err, errRestoreEnded) || errors.Is(b.err, context.Canceled)):
		// The restore failed first (no space, a refusal, mbstream) and
		// the backup was stopped for it: the restore's error is the cause.
		return res, b.n, fmt.Errorf("clone: restore: %w (the donor's backup was stopped after %d bytes)", rerr, b.n)
	case b.err != nil && rerr != nil && strings.Contains(rerr.Error(), b.err.Error()):
		// The restore failed on the stream the backup cut: say it once.
		return res, b.n, fmt.Errorf("clone: backup: %w (the restore was aborted)", b.err)
	case b.err != nil && rerr != nil:
		return res, b.n, fmt.Errorf("clone: backup: %w; restore: %v", b.err, rerr)
	case b.err != nil:
		// The restore cannot have succeeded on a failed stream, but say so
		// if it claims to have.
		return res, b.n, fmt.Errorf("clone: backup failed but the restore reported success (check the target): %w", b.err)
	case rerr != nil:
		return res, b.n, fmt.Errorf("clone: restore: %w", rerr)
	}
	return res, b.n, nil
}
