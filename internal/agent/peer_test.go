package agent

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An agent's certificate (what a peer pulling a clone presents) gets one
// ticketed backup and nothing else; Vigil's gets everything, tickets
// included.
func TestPeerCertificateGetsOnlyATicketedBackup(t *testing.T) {
	a := startAgent(t, func(c *Config) { c.Token = "s3cret" })
	ctx := context.Background()
	vigil := a.client(t, "s3cret")
	peer, err := NewClient(ClientConfig{Addr: a.addr, CA: a.certs.CA, Cert: a.certs.AgentCert, Key: a.certs.AgentKey, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	code := func(err error) string {
		var ae *Error
		if errors.As(err, &ae) {
			return ae.Code
		}
		return "not an agent error: " + errString(err)
	}
	// With the right token, a peer still gets nothing else.
	if _, err := peer.Status(ctx); code(err) != CodeForbidden {
		t.Errorf("status with an agent's certificate: %v, want forbidden", err)
	}
	if _, err := peer.Ticket(ctx, 0); code(err) != CodeForbidden {
		t.Errorf("ticket with an agent's certificate: %v, want forbidden", err)
	}
	if _, err := peer.Cleanup(ctx); code(err) != CodeForbidden {
		t.Errorf("cleanup with an agent's certificate: %v, want forbidden", err)
	}
	// A backup without a ticket, or with a wrong one.
	for _, tk := range []string{"", "not-the-ticket"} {
		resp, err := peer.openBackup(ctx, nil, tk)
		if err == nil {
			resp.Body.Close()
		}
		if code(err) != CodeUnauthorized {
			t.Errorf("backup with ticket %q: %v, want unauthorized", tk, err)
		}
	}
	tk, err := vigil.Ticket(ctx, 12345)
	if err != nil || len(tk.Ticket) < 40 || time.Until(tk.Expires) > ticketTTL {
		t.Fatalf("ticket: %+v %v", tk, err)
	}
	// The right ticket passes authentication: the agent then finds no
	// server to back up here (409 unknown_state), and the ticket is used.
	resp, err := peer.openBackup(ctx, nil, tk.Ticket)
	if err == nil {
		resp.Body.Close()
	}
	if code(err) != CodeUnknownState {
		t.Errorf("backup with the ticket: %v, want it to reach the backup (unknown_state: no server)", err)
	}
	resp, err = peer.openBackup(ctx, nil, tk.Ticket)
	if err == nil {
		resp.Body.Close()
	}
	if code(err) != CodeUnauthorized {
		t.Errorf("the ticket a second time: %v, want unauthorized", err)
	}
	// An expired ticket, and one replaced by a newer one.
	old, _ := vigil.Ticket(ctx, 0)
	if _, err := vigil.Ticket(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.srv.useTicket(old.Ticket); ok {
		t.Error("a replaced ticket was accepted")
	}
	last, _ := vigil.Ticket(ctx, 0)
	a.srv.mu.Lock()
	a.srv.ticket.expires = time.Now().Add(-time.Second)
	a.srv.mu.Unlock()
	if _, ok := a.srv.useTicket(last.Ticket); ok {
		t.Error("an expired ticket was accepted")
	}
	a.audit.waitFor(t, `"peer":true`, `"code":"forbidden"`, "no valid backup ticket")
	if strings.Contains(a.audit.String(), tk.Ticket) {
		t.Errorf("the audit log shows a ticket:\n%s", a.audit.String())
	}
	if st, err := vigil.Status(ctx); err != nil || !st.PeerPull {
		t.Errorf("status: peer_pull %v, err %v: agent init's certificate has both usages", st.PeerPull, err)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// A restore from another agent that refuses (a wrong ticket) fails as
// no_peer with the datadir untouched; bad requests are refused.
func TestRestoreFromRefusals(t *testing.T) {
	donor := startAgent(t, nil)
	// The target shares the donor's CA, as agents of one Vigil do.
	target := startAgent(t, func(c *Config) {
		c.TLS = TLS{CA: donor.certs.CA, Cert: donor.certs.AgentCert, Key: donor.certs.AgentKey}
	})
	target.certs = donor.certs
	ctx := context.Background()
	c := target.client(t, "")
	_, err := c.RestoreFrom(ctx, donor.addr, "wrong", RestoreOptions{})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeNoPeer || ae.Status != http.StatusBadGateway || !strings.Contains(ae.Message, "no valid backup ticket") {
		t.Errorf("restore from a donor with a wrong ticket: %v, want no_peer naming the ticket", err)
	}
	for _, tc := range []struct{ from, ticket, want string }{
		{"not-an-address", "x", "not host:port"},
		{donor.addr, "", "needs the ticket"},
	} {
		if _, err := c.RestoreFrom(ctx, tc.from, tc.ticket, RestoreOptions{}); !errors.As(err, &ae) || ae.Code != CodeBadRequest || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("from %q ticket %q: %v, want bad_request %q", tc.from, tc.ticket, err, tc.want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(target.cfg.Datadir, "ibdata1")); err != nil || string(data) != "precious" {
		t.Errorf("target datadir after refused pulls: %q %v", data, err)
	}
	if left, _ := filepath.Glob(target.cfg.Datadir + suffixNew + "*"); len(left) != 0 {
		t.Errorf("leftovers: %v", left)
	}
}

// The donor's agent answers but refuses the backup (busy): another donor
// is needed, not a relay (donor_failed, not no_peer). The progress read
// is Vigil's alone, null without a restore, and not audited when ok.
func TestRestoreFromBusyDonorAndProgress(t *testing.T) {
	donor := startAgent(t, func(c *Config) { c.Commands.Stop = []string{"sleep", "2"} })
	target := startAgent(t, func(c *Config) {
		c.TLS = TLS{CA: donor.certs.CA, Cert: donor.certs.AgentCert, Key: donor.certs.AgentKey}
	})
	target.certs = donor.certs
	ctx := context.Background()
	dc, tc := donor.client(t, ""), target.client(t, "")
	go func() { _, _ = dc.Stop(ctx) }()
	deadline := time.Now().Add(3 * time.Second)
	for donor.srv.busyOp() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	tk, err := dc.Ticket(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tc.RestoreFrom(ctx, donor.addr, tk.Ticket, RestoreOptions{})
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeDonorFailed || !strings.Contains(ae.Message, "busy") {
		t.Errorf("restore from a busy donor: %v, want donor_failed naming busy", err)
	}
	if p, err := tc.Progress(ctx); err != nil || p != nil {
		t.Errorf("progress without a restore: %+v %v", p, err)
	}
	peer, err := NewClient(ClientConfig{Addr: target.addr, CA: donor.certs.CA, Cert: donor.certs.AgentCert, Key: donor.certs.AgentKey})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Progress(ctx); !errors.As(err, &ae) || ae.Code != CodeForbidden {
		t.Errorf("progress with an agent's certificate: %v, want forbidden", err)
	}
	target.audit.waitFor(t, `"op":"progress"`, `"code":"forbidden"`)
	for _, line := range strings.Split(target.audit.String(), "\n") {
		if strings.Contains(line, `"op":"progress"`) && strings.Contains(line, `"outcome":"ok"`) {
			t.Errorf("an ok progress read was audited: %s", line)
		}
	}
}

// Vigil's own certificate must not look like an agent's.
func TestCheckVigilCertificate(t *testing.T) {
	c := newCerts(t)
	if err := CheckVigilCertificate(c.ClientCert, c.ClientKey); err != nil {
		t.Errorf("vigil.crt: %v", err)
	}
	if err := CheckVigilCertificate(c.AgentCert, c.AgentKey); err == nil || !strings.Contains(err.Error(), "client authentication only") {
		t.Errorf("agent.crt as Vigil's: %v", err)
	}
}
