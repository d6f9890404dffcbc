package api

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/usersync/usersync/models"
)

// TestOpenAPI_OutboundTypesAndKindsAreTheKindsTables keeps every enum of an
// outbound type, an event-type pattern or a kind in the endpoints' part of
// the document equal to the kinds table and models.OutboundTypes: a kind or
// an outbound type added there is documented, or this fails.
func TestOpenAPI_OutboundTypesAndKindsAreTheKindsTables(t *testing.T) {
	t.Parallel()
	var kinds []string
	for _, k := range models.Kinds {
		kinds = append(kinds, string(k))
	}
	types := models.OutboundTypes()
	patterns := []string{"*"}
	for _, typ := range types {
		name, _, _ := strings.Cut(typ, ".")
		if !slices.Contains(patterns, name+".*") {
			patterns = append(patterns, name+".*")
		}
	}
	patterns = append(patterns, types...)
	// A delivery's kind is one of the table's, or a payer's plan.
	deliveryKinds := append(slices.Clone(kinds), string(models.KindPlan))

	type enum struct {
		Enum  []string `json:"enum"`
		Items struct {
			Enum []string `json:"enum"`
		} `json:"items"`
	}
	type object struct {
		Properties map[string]enum `json:"properties"`
	}
	var doc struct {
		Components struct {
			Schemas map[string]object `json:"schemas"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content struct {
					JSON struct {
						Schema object `json:"schema"`
					} `json:"application/json"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	sc := doc.Components.Schemas
	for _, c := range []struct {
		where     string
		got, want []string
	}{
		{"OutboundWebhook.type", sc["OutboundWebhook"].Properties["type"].Enum, append(slices.Clone(types), "usersync.test")},
		{"EndpointAttempt.type", sc["EndpointAttempt"].Properties["type"].Enum, types},
		{"EndpointDelivery.type", sc["EndpointDelivery"].Properties["type"].Enum, types},
		{"EndpointDelivery.kind", sc["EndpointDelivery"].Properties["kind"].Enum, deliveryKinds},
		{"Endpoint.eventTypes", sc["Endpoint"].Properties["eventTypes"].Items.Enum, patterns},
		{"POST /v1/endpoints eventTypes", doc.Paths["/v1/endpoints"]["post"].RequestBody.Content.JSON.Schema.Properties["eventTypes"].Items.Enum, patterns},
		{"PATCH /v1/endpoints/{id} eventTypes", doc.Paths["/v1/endpoints/{id}"]["patch"].RequestBody.Content.JSON.Schema.Properties["eventTypes"].Items.Enum, patterns},
		{"POST /v1/endpoints/{id}/replay kind", doc.Paths["/v1/endpoints/{id}/replay"]["post"].RequestBody.Content.JSON.Schema.Properties["kind"].Enum, kinds},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.where, c.got, c.want)
		}
	}
	// Every pattern the document offers is one an endpoint accepts.
	if err := models.CheckEventTypes(patterns); err != nil {
		t.Errorf("the documented patterns are refused: %v", err)
	}
}

// TestOpenAPI_EndpointsDocumentTheParametersTheyBind: the endpoints' lists
// document the query parameters they take, with the limits bound; the
// attempts take failed, the deliveries status (and refuse failed).
func TestOpenAPI_EndpointsDocumentTheParametersTheyBind(t *testing.T) {
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
	bound := fields(&endpointPageRequest{}, "query")
	for route, without := range map[string]string{
		"GET /v1/endpoints/{id}/attempts":   "status",
		"GET /v1/endpoints/{id}/deliveries": "failed",
		"GET /v1/endpoints":                 "*",
	} {
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
		var want []string
		if without != "*" {
			want = slices.DeleteFunc(slices.Sorted(maps.Keys(bound)), func(n string) bool { return n == without })
		}
		if got := slices.Sorted(maps.Keys(documented)); !slices.Equal(got, want) {
			t.Errorf("%s documents query parameters %v, want %v", route, got, want)
		}
		for name, p := range documented {
			f := bound[name]
			if hi, ok := tagInt(f, "max"); ok && name == "limit" && (p.Schema.Maximum == nil || *p.Schema.Maximum != hi) {
				t.Errorf("%s limit: documented maximum %v, bound %d", route, p.Schema.Maximum, hi)
			}
			if hi, ok := tagInt(f, "max"); ok && name == "cursor" && (p.Schema.MaxLength == nil || *p.Schema.MaxLength != hi) {
				t.Errorf("%s cursor: documented maxLength %v, bound %d", route, p.Schema.MaxLength, hi)
			}
		}
	}
}
