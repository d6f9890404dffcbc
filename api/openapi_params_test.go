package api

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPI_QueryParametersAndLimitsAreTheOnesBound keeps the document's
// query parameters, and their limits, equal to what each endpoint binds.
func TestOpenAPI_QueryParametersAndLimitsAreTheOnesBound(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Parameters map[string]openAPIParam `json:"parameters"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			Parameters []openAPIParam `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	endpoints := map[string]any{
		"GET /v1/users":                             &listUsersRequest{},
		"GET /v1/users/{userId}":                    &getUserRequest{},
		"GET /v1/events":                            &listEventsRequest{},
		"GET /v1/events/stats":                      &struct{}{},
		"GET /v1/event-types":                       &struct{}{},
		"GET /v1/organizations":                     &listOrganizationsRequest{},
		"GET /v1/organizations/{orgId}":             &getOrganizationRequest{},
		"GET /v1/organizations/{orgId}/memberships": &listMembershipsRequest{},
		"GET /v1/users/{userId}/memberships":        &listMembershipsRequest{},
		"GET /v1/memberships":                       &membershipFeedRequest{},
		"GET /v1/billing/plans":                     &planFeedRequest{},
		"GET /v1/billing/payment-attempts":          &listPaymentAttemptsRequest{},
		"GET /v1/endpoints":                         &struct{}{},
		"GET /v1/endpoints/{id}/attempts":           &listAttemptsRequest{},
		"GET /v1/endpoints/{id}/deliveries":         &listDeliveriesRequest{},
	}
	for route, req := range endpoints {
		method, path, _ := strings.Cut(route, " ")
		op, ok := doc.Paths[path][strings.ToLower(method)]
		if !ok {
			t.Errorf("%s is not in the document", route)
			continue
		}
		documented := map[string]openAPIParam{}
		for _, p := range op.Parameters {
			if ref, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
				p = doc.Components.Parameters[ref]
			}
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
			if name == "cursor" {
				// The event log's, in its tag; every other, the page reader's.
				hi, ok := tagInt(f, "max")
				if !ok {
					hi = maxCursor
				}
				if got := p.Schema.MaxLength; got == nil {
					t.Errorf("%s cursor: no maxLength documented, bound %d", route, hi)
				} else if *got != hi {
					t.Errorf("%s cursor: documented maxLength %d, bound %d", route, *got, hi)
				}
			}
		}
	}
}

type openAPIParam struct {
	Ref    string `json:"$ref"`
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Maximum   *int64 `json:"maximum"`
		MaxLength *int64 `json:"maxLength"`
	} `json:"schema"`
}
