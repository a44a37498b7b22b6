package admin

import (
	_ "embed"
	"net/http"
)

// openAPI is the API's description, kept in sync with the routes by
// TestOpenAPIMatchesRoutes.
//
//go:embed openapi.json
var openAPI []byte

func (s *Server) docRoutes() {
	s.configRoutes()
	s.membershipRoutes()
	s.clusterRoutes()
	s.mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	})
}
