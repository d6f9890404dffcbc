package api

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// TestOpenAPI_KindsAndEventTypesAreTheKindsTables keeps every enum of a
// kind or an event type in the document equal to the kinds table: a kind
// added there is documented, or this fails.
func TestOpenAPI_KindsAndEventTypesAreTheKindsTables(t *testing.T) {
	t.Parallel()
	var kinds, short []string
	for _, k := range models.Kinds {
		kinds = append(kinds, string(k))
	}
	for _, typ := range models.StoredTypes() {
		if s := string(models.EventTypeOf(typ)); !slices.Contains(short, s) {
			short = append(short, s)
		}
	}
	params := append(slices.Clone(short), models.StoredTypes()...)
	stored := append(slices.Clone(short), string(models.EventOther))

	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string `json:"name"`
				Schema struct {
					Enum []string `json:"enum"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/events", "/v1/events/failures"} {
		for _, p := range doc.Paths[path]["get"].Parameters {
			switch p.Name {
			case "kind":
				if !slices.Equal(p.Schema.Enum, kinds) {
					t.Errorf("%s kind: %v, want %v", path, p.Schema.Enum, kinds)
				}
			case "eventType":
				if !slices.Equal(p.Schema.Enum, params) {
					t.Errorf("%s eventType: %v, want %v", path, p.Schema.Enum, params)
				}
			}
		}
	}
	if got := doc.Components.Schemas["Event"].Properties["eventType"].Enum; !slices.Equal(got, stored) {
		t.Errorf("Event.eventType: %v, want %v", got, stored)
	}
	var dry struct {
		Properties struct {
			Changes struct {
				Items struct {
					Properties struct {
						Kind struct {
							Enum []string `json:"enum"`
						} `json:"kind"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"changes"`
		} `json:"properties"`
	}
	var raw struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw.Components.Schemas["DryRun"], &dry); err != nil {
		t.Fatal(err)
	}
	var reconciled []string
	for _, k := range sync.ReconcileKinds() {
		reconciled = append(reconciled, string(k))
	}
	if got := dry.Properties.Changes.Items.Properties.Kind.Enum; !slices.Equal(got, reconciled) {
		t.Errorf("DryRun.changes.kind: %v, want %v", got, reconciled)
	}
}

// TestOpenAPI_FatesAreTheCatalogs keeps the document's fates of an event
// type equal to models.Fates.
func TestOpenAPI_FatesAreTheCatalogs(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []models.Fate `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Components.Schemas["ClerkEventType"].Properties["fate"].Enum; !slices.Equal(got, models.Fates) {
		t.Errorf("ClerkEventType.fate: %v, want %v", got, models.Fates)
	}
}
