package api

import (
	"encoding/json"
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
