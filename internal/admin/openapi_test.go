package admin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// routePattern finds the patterns handlers are registered with.
var routePattern = regexp.MustCompile(`"(GET|POST|PUT|DELETE|PATCH) (/[^"]*)"`)

// TestOpenAPIMatchesRoutes keeps openapi.json in sync with the routes the
// admin server (and the dashboard package) register: every route is
// documented and every documented operation exists.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi version %q", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
		}
	}
	registered := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("../webui/*.go")
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
			if strings.HasSuffix(m[2], "/") || strings.Contains(m[2], "{path...}") {
				continue // static assets of the dashboard
			}
			registered[m[1]+" "+strings.TrimSuffix(m[2], "{$}")] = true
		}
	}
	var missing, stale []string
	for r := range registered {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for d := range documented {
		if !registered[d] {
			stale = append(stale, d)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("routes not in openapi.json: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("openapi.json documents routes that do not exist: %v", stale)
	}
}
