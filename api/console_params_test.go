package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPI_ConsoleEndpointsDocumentTheParametersTheyBind keeps the
// document's query parameters of the console's endpoints, and their
// limits, equal to what each binds.
func TestOpenAPI_ConsoleEndpointsDocumentTheParametersTheyBind(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []openAPIParam `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for route, req := range map[string]any{
		"GET /v1/admin/overview":     &struct{}{},
		"GET /v1/admin/activity":     &activityRequest{},
		"GET /v1/events/failures":    &failuresRequest{},
		"POST /v1/events/replay":     &bulkReplayRequest{},
		"GET /v1/reconcile/runs":     &reconcileRunsRequest{},
		"GET /v1/reconcile/dry-run":  &struct{}{},
		"POST /v1/reconcile/dry-run": &struct{}{},
	} {
		method, path, _ := strings.Cut(route, " ")
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("%s is not in the document", route)
			continue
		}
		documented := map[string]openAPIParam{}
		for _, p := range op.Parameters {
			if p.In == "query" {
				documented[p.Name] = p
			}
		}
		bound := fields(req, "query")
		if got, want := slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(bound)); !slices.Equal(got, want) {
			t.Errorf("%s documents query parameters %v, binds %v", route, got, want)
		}
		for name, f := range bound {
			p := documented[name]
			if hi, ok := tagInt(f, "max"); ok && f.Type.Kind() == reflect.Int {
				if p.Schema.Maximum == nil || *p.Schema.Maximum != hi {
					t.Errorf("%s %s: documented maximum %v, bound %d", route, name, p.Schema.Maximum, hi)
				}
			}
		}
	}
}
