package admin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// stubCtl answers the few routes the auth tests call.
type stubCtl struct{ Controller }

func (stubCtl) Servers() []ServerView        { return []ServerView{} }
func (stubCtl) Reload(context.Context) error { return nil }

func request(s *Server, method, path, host, origin, ctype, token string) int {
	r := httptest.NewRequest(method, path, strings.NewReader(`{}`))
	r.Host = host
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w.Code
}

// TestAdminRefusesCrossSite: a web page the operator opens cannot drive
// the admin API: a foreign Host (DNS rebinding), a foreign Origin, or a
// POST that is not JSON are refused before authentication.
func TestAdminRefusesCrossSite(t *testing.T) {
	s := New(Options{Listen: "127.0.0.1:6080", Token: "t0k"}, stubCtl{}, nil, nil)
	const ok = "127.0.0.1:6080"
	for _, tc := range []struct {
		name, method, host, origin, ctype, token string
		want                                     int
	}{
		{"no token", "GET", ok, "", "", "", 401},
		{"token", "GET", ok, "", "", "t0k", 200},
		{"localhost", "GET", "localhost:6080", "", "", "t0k", 200},
		{"rebinding host", "GET", "evil.example:6080", "", "", "t0k", 403},
		{"foreign origin", "POST", ok, "http://evil.example", "application/json", "t0k", 403},
		{"text/plain post", "POST", ok, "", "text/plain", "t0k", 415},
		{"form post", "POST", ok, "", "application/x-www-form-urlencoded", "t0k", 415},
		{"same origin json", "POST", ok, "http://127.0.0.1:6080", "application/json", "t0k", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/api/v1/servers"
			if tc.method == "POST" {
				path = "/api/v1/config/reload"
			}
			if got := request(s, tc.method, path, tc.host, tc.origin, tc.ctype, tc.token); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
}

// TestDashboardRefusesForeignHost: the dashboard's page and assets need
// no token, but a foreign Host (DNS rebinding) gets 403 as on the API
// (issue 25 item 4).
func TestDashboardRefusesForeignHost(t *testing.T) {
	s := New(Options{Listen: "127.0.0.1:6080", Token: "t0k"}, stubCtl{}, nil, nil)
	for _, tc := range []struct {
		path, host string
		want       int
	}{
		{"/ui/", "127.0.0.1:6080", 200},
		{"/ui/", "localhost:6080", 200},
		{"/ui/", "evil.example:6080", 403},
		{"/ui/", "evil.example", 403},
		{"/ui/stream", "evil.example:6080", 403},
	} {
		if got := request(s, "GET", tc.path, tc.host, "", "", ""); got != tc.want {
			t.Errorf("GET %s with Host %s: %d, want %d", tc.path, tc.host, got, tc.want)
		}
	}
}

// TestAdminFailsClosed: with no token and no user configured every
// request is refused unless auth is explicitly none; a new token
// replaces the old one at once.
func TestAdminFailsClosed(t *testing.T) {
	s := New(Options{Listen: "127.0.0.1:6080"}, stubCtl{}, nil, nil)
	if got := request(s, "GET", "/api/v1/servers", "127.0.0.1:6080", "", "", ""); got != 401 {
		t.Fatalf("no credentials configured: %d", got)
	}
	s.SetOptions(Options{Listen: "127.0.0.1:6080", NoAuth: true})
	if got := request(s, "GET", "/api/v1/servers", "127.0.0.1:6080", "", "", ""); got != 200 {
		t.Fatalf("auth none: %d", got)
	}
	s.SetOptions(Options{Listen: "127.0.0.1:6080", Token: "old"})
	s.SetOptions(Options{Listen: "127.0.0.1:6080", Token: "new"})
	if got := request(s, "GET", "/api/v1/servers", "127.0.0.1:6080", "", "", "old"); got != 401 {
		t.Fatalf("old token after rotation: %d", got)
	}
	if got := request(s, "GET", "/api/v1/servers", "127.0.0.1:6080", "", "", "new"); got != 200 {
		t.Fatalf("new token: %d", got)
	}
	_ = http.MethodGet
}
