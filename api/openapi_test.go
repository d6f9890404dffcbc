package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/repository/repotest"
)

var echoParam = regexp.MustCompile(`:([A-Za-z]+)`)

func TestOpenAPI_DocumentsEveryRouteAndNoOther(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.get("/openapi.json", "")
	if r.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json = %s", r)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			documented[strings.ToUpper(method)+" "+path] = true
			if _, ok := op["responses"]; !ok {
				t.Errorf("%s %s documents no responses", method, path)
			}
		}
	}

	e, err := api.New(api.Config{Logger: repotest.Discard(), WebhookSecrets: []string{testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, rt := range e.Routes() {
		if strings.HasSuffix(rt.Name, "glob..func1") || rt.Method == "echo_route_not_found" {
			continue
		}
		registered[rt.Method+" "+echoParam.ReplaceAllString(rt.Path, "{$1}")] = true
	}
	for route := range registered {
		if !documented[route] {
			t.Errorf("route %s is not in the OpenAPI document", route)
		}
	}
	for route := range documented {
		if !registered[route] {
			t.Errorf("the OpenAPI document has %s, which is not a route", route)
		}
	}
	if len(registered) < 11 {
		t.Errorf("only %d routes registered: %v", len(registered), slices.Sorted(maps.Keys(registered)))
	}
}
