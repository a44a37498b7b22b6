package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type cloneCtl struct {
	stubCtl
	got CloneRequest
}

func (c *cloneCtl) Clone(_ context.Context, r CloneRequest) (any, error) {
	c.got = r
	if r.Target == "n1" {
		return nil, &Error{http.StatusConflict, "refused: n1 is the writer; switch over first"}
	}
	return map[string]any{"id": 1, "target": r.Target, "phase": "fencing"}, nil
}

func (c *cloneCtl) Clones() any { return map[string]any{"running": []any{}, "finished": []any{}} }

func TestCloneRoutes(t *testing.T) {
	ctl := &cloneCtl{}
	s := New(Options{Listen: "127.0.0.1:6080", NoAuth: true}, ctl, nil, nil)
	do := func(method, body string) (int, string) {
		r := httptest.NewRequest(method, "/api/v1/clone", strings.NewReader(body))
		r.Host = "127.0.0.1:6080"
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	if code, body := do("POST", `{"target":"n3","from":"n2","rate":1000}`); code != http.StatusAccepted || !strings.Contains(body, `"phase": "fencing"`) {
		t.Fatalf("POST: %d %s", code, body)
	}
	if ctl.got != (CloneRequest{Target: "n3", From: "n2", Rate: 1000, Kind: "clone"}) {
		t.Fatalf("request: %+v", ctl.got)
	}
	if code, body := do("POST", `{"target":"n1"}`); code != http.StatusConflict || !strings.Contains(body, "switch over first") {
		t.Fatalf("writer: %d %s", code, body)
	}
	if code, _ := do("POST", `{}`); code != http.StatusBadRequest {
		t.Fatalf("no target: %d", code)
	}
	code, body := do("GET", "")
	var v map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v["running"] == nil {
		t.Fatalf("GET: %d %s", code, body)
	}
	// A controller that does not clone answers 501.
	s2 := New(Options{Listen: "127.0.0.1:6080", NoAuth: true}, stubCtl{}, nil, nil)
	r := httptest.NewRequest("GET", "/api/v1/clone", nil)
	r.Host = "127.0.0.1:6080"
	w := httptest.NewRecorder()
	s2.Handler().ServeHTTP(w, r)
	if w.Code != http.StatusNotImplemented {
		t.Fatalf("without a Cloner: %d", w.Code)
	}
}
