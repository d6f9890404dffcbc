package api_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

type eventTypesAnswer struct {
	Since string `json:"since"`
	Types []struct {
		Type           string  `json:"type"`
		Fate           string  `json:"fate"`
		Kind           string  `json:"kind"`
		Projects       string  `json:"projects"`
		Received       int64   `json:"received"`
		LastReceivedAt *string `json:"lastReceivedAt"`
	} `json:"types"`
	Unknown []struct {
		Type           string  `json:"type"`
		Received       int64   `json:"received"`
		LastReceivedAt *string `json:"lastReceivedAt"`
	} `json:"unknown"`
	Other struct {
		Received       int64   `json:"received"`
		LastReceivedAt *string `json:"lastReceivedAt"`
	} `json:"other"`
}

func (h *harness) eventTypes() eventTypesAnswer {
	h.t.Helper()
	var a eventTypesAnswer
	decode(h.t, h.get("/v1/event-types", testAdminKey), http.StatusOK, &a)
	return a
}

// unknownTypeLines are the "unknown event type" lines of logs.
func unknownTypeLines(t *testing.T, logs *logBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range logs.lines(t) {
		if l["msg"] == "unknown event type" {
			out = append(out, l)
		}
	}
	return out
}

// TestEventTypes_ListsEveryTypeOfTheCatalogWithItsFateAndCounts: GET
// /v1/event-types answers every type of Clerk's catalog, in its order,
// with its fate (the kind its events are stored as, if any, and what a
// projected one projects), and the signed deliveries of each since the process started:
// a duplicate counts again, a delivery refused before its type is read
// does not count. The answer is what the OpenAPI document says.
func TestEventTypes_ListsEveryTypeOfTheCatalogWithItsFateAndCounts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	before := time.Now().UTC().Add(-time.Second)
	created := fixture(t, "user.created.json")
	h.mustDeliver("msg_types_1", created)
	if got := h.mustDeliver("msg_types_1", created); got["duplicate"] != true {
		t.Fatalf("the second delivery answered %v, want a duplicate", got)
	}
	h.mustDeliver(newID(), fixture(t, "session.created.json"))
	h.mustDeliver(newID(), []byte(`{"type":"email.created","data":{}}`))
	// Refused: a wrong signature, and a body with no type.
	if r := h.post(created, sign(t, otherSecret, newID(), time.Now(), created)); r.Code != http.StatusUnauthorized {
		t.Fatalf("a wrong signature: %s", r)
	}
	if r := h.deliver(newID(), []byte(`{"data":{}}`)); r.Code != http.StatusBadRequest {
		t.Fatalf("a body with no type: %s", r)
	}

	a := h.eventTypes()
	if len(a.Types) != len(models.ClerkEventTypes) {
		t.Fatalf("%d types, want the catalog's %d", len(a.Types), len(models.ClerkEventTypes))
	}
	want := map[string]int64{"user.created": 2, "session.created": 1, "email.created": 1}
	for i, c := range models.ClerkEventTypes {
		got := a.Types[i]
		if got.Type != c.Type || got.Fate != string(c.Fate()) {
			t.Errorf("types[%d] = %s %s, want %s %s", i, got.Type, got.Fate, c.Type, c.Fate())
		}
		if got.Kind != string(models.KindOf(c.Type)) {
			t.Errorf("%s: kind %q, want %q", c.Type, got.Kind, models.KindOf(c.Type))
		}
		if got.Projects != c.Projects {
			t.Errorf("%s: projects %q, want %q", c.Type, got.Projects, c.Projects)
		}
		if got.Received != want[c.Type] {
			t.Errorf("%s: received %d, want %d", c.Type, got.Received, want[c.Type])
		}
		if (got.LastReceivedAt != nil) != (want[c.Type] > 0) {
			t.Errorf("%s: lastReceivedAt %v after %d deliveries", c.Type, got.LastReceivedAt, want[c.Type])
		}
		if got.LastReceivedAt != nil {
			if at, err := time.Parse(time.RFC3339Nano, *got.LastReceivedAt); err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
				t.Errorf("%s: lastReceivedAt %s, %v; want now", c.Type, *got.LastReceivedAt, err)
			}
		}
	}
	if len(a.Unknown) != 0 || a.Other.Received != 0 || a.Other.LastReceivedAt != nil {
		t.Errorf("unknown %+v, other %+v; want none", a.Unknown, a.Other)
	}
	if since, err := time.Parse(time.RFC3339Nano, a.Since); err != nil || since.After(before.Add(time.Second)) {
		t.Errorf("since = %q, %v; want when the server started", a.Since, err)
	}

	var doc, v map[string]any
	decode(t, h.get("/openapi.json", ""), http.StatusOK, &doc)
	decode(t, h.get("/v1/event-types", testAdminKey), http.StatusOK, &v)
	op := doc["paths"].(map[string]any)["/v1/event-types"].(map[string]any)["get"].(map[string]any)
	schema := op["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	for _, e := range schemaErrors(doc, schema, v, "GET /v1/event-types") {
		t.Error(e)
	}
}

// TestEventTypes_AnUnknownTypeIsCountedAndLoggedOnce: a type in no row of
// the catalog, ignored or stored (a billing type usersync does not know),
// is counted by its name and logged the first time only; it never becomes
// a metric's label.
func TestEventTypes_AnUnknownTypeIsCountedAndLoggedOnce(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	for range 3 {
		h.mustDeliver(newID(), []byte(`{"type":"made.up","data":{}}`))
	}
	h.mustDeliver(newID(), []byte(`{"type":"subscriptionItem.somethingNew","data":{"id":"csub_item_new","object":"subscription_item"}}`))

	a := h.eventTypes()
	if len(a.Unknown) != 2 || a.Unknown[0].Type != "made.up" || a.Unknown[0].Received != 3 || a.Unknown[0].LastReceivedAt == nil ||
		a.Unknown[1].Type != "subscriptionItem.somethingNew" || a.Unknown[1].Received != 1 {
		t.Errorf("unknown = %+v, want made.up 3 times, then subscriptionItem.somethingNew once", a.Unknown)
	}
	if a.Other.Received != 0 {
		t.Errorf("other = %+v, want none", a.Other)
	}
	lines := unknownTypeLines(t, &logs)
	var logged []string
	for _, l := range lines {
		logged = append(logged, fmt.Sprint(l["type"]))
	}
	if strings.Join(logged, " ") != "made.up subscriptionItem.somethingNew" {
		t.Errorf("unknown types logged %q, want each once", logged)
	}
	if exposition := string(h.get("/metrics", "").Body); strings.Contains(exposition, "made.up") || strings.Contains(exposition, "somethingNew") {
		t.Error("an unknown type became a metric's label")
	}
}

// TestEventTypes_UnknownTypesAreBoundedInNumberAndLength: at most 64
// unknown types are kept by name, each of a type's shape and at most 64
// bytes; the deliveries of any other are counted under other, which is
// logged once, when it is first used because the names are full.
func TestEventTypes_UnknownTypesAreBoundedInNumberAndLength(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	h := newHarness(t, func(o *harnessOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	long := strings.Repeat("x", 60) + ".made"
	for _, typ := range []string{long, "made up", "made.up\n", "<script>.x"} {
		h.mustDeliver(newID(), []byte(fmt.Sprintf(`{"type":%q,"data":{}}`, typ)))
	}
	if a := h.eventTypes(); len(a.Unknown) != 0 || a.Other.Received != 4 || a.Other.LastReceivedAt == nil {
		t.Fatalf("unknown %+v, other %+v; want the four names too long or not a type's counted under other", a.Unknown, a.Other)
	}
	if lines := unknownTypeLines(t, &logs); len(lines) != 0 {
		t.Fatalf("logged %v, want nothing before the names are full", lines)
	}
	for i := range 70 {
		h.mustDeliver(newID(), []byte(fmt.Sprintf(`{"type":"made.up%d","data":{}}`, i)))
	}
	a := h.eventTypes()
	if len(a.Unknown) != 64 || a.Unknown[0].Type != "made.up0" || a.Unknown[63].Type != "made.up63" {
		t.Errorf("%d unknown types kept by name, want the first 64", len(a.Unknown))
	}
	if a.Other.Received != 4+6 {
		t.Errorf("other received %d, want 10", a.Other.Received)
	}
	lines := unknownTypeLines(t, &logs)
	if len(lines) != 65 || lines[64]["type"] != "other" {
		t.Errorf("%d unknown type lines, want 64 names and other once", len(lines))
	}
}

// TestEventTypes_NeedsTheAdminKeyAndTakesNoParameters.
func TestEventTypes_NeedsTheAdminKeyAndTakesNoParameters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, c := range []struct {
		path, key string
		code      int
	}{
		{"/v1/event-types", "", http.StatusUnauthorized},
		{"/v1/event-types", testAPIKey, http.StatusForbidden},
		{"/v1/event-types?fate=applied", testAdminKey, http.StatusBadRequest},
		{"/v1/event-types", testAdminKey, http.StatusOK},
	} {
		if r := h.get(c.path, c.key); r.Code != c.code {
			t.Errorf("GET %s with key %q: %s, want %d", c.path, c.key, r, c.code)
		}
	}
}
