package api_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// schemaErrors lists where v, an answer decoded from JSON, is not what
// schema (a part of doc, the OpenAPI document) says: a field the schema
// does not name (where it names any), a required field missing, or a value of a type (null
// included) or outside an enum it does not allow.
func schemaErrors(doc, schema map[string]any, v any, at string) []string {
	return checkSchema(doc, schema, v, at, false)
}

// checkSchema is schemaErrors; open leaves out the check that every field
// is named, for the parts of an allOf, where another part names it.
func checkSchema(doc, schema map[string]any, v any, at string, open bool) []string {
	if ref, ok := schema["$ref"].(string); ok {
		s, ok := resolveRef(doc, ref)
		if !ok {
			return []string{fmt.Sprintf("%s: $ref %s leads nowhere", at, ref)}
		}
		return checkSchema(doc, s, v, at, open)
	}
	for _, key := range []string{"oneOf", "anyOf"} {
		variants, ok := schema[key].([]any)
		if !ok {
			continue
		}
		var all []string
		for _, variant := range variants {
			errs := checkSchema(doc, variant.(map[string]any), v, at, open)
			if len(errs) == 0 {
				return nil
			}
			all = append(all, errs...)
		}
		return all
	}
	if parts, ok := schema["allOf"].([]any); ok {
		var errs []string
		for _, part := range parts {
			errs = append(errs, checkSchema(doc, part.(map[string]any), v, at, true)...)
		}
		if m, ok := v.(map[string]any); ok && !open {
			named := map[string]bool{}
			for _, part := range parts {
				for k := range propertiesOf(doc, part.(map[string]any)) {
					named[k] = true
				}
			}
			for k := range m {
				if !named[k] {
					errs = append(errs, fmt.Sprintf("%s.%s is not in the document", at, k))
				}
			}
		}
		return errs
	}
	var types []string
	switch t := schema["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, x.(string))
		}
	}
	kind := "null"
	switch x := v.(type) {
	case bool:
		kind = "boolean"
	case string:
		kind = "string"
	case float64:
		kind = "number"
		if x == math.Trunc(x) && slices.Contains(types, "integer") {
			kind = "integer"
		}
	case []any:
		kind = "array"
	case map[string]any:
		kind = "object"
	}
	if len(types) > 0 && !slices.Contains(types, kind) {
		return []string{fmt.Sprintf("%s: a %s, where the document allows %v", at, kind, types)}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.Contains(enum, v) {
		return []string{fmt.Sprintf("%s: %v, where the document allows %v", at, v, enum)}
	}
	var errs []string
	switch x := v.(type) {
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range x {
				errs = append(errs, checkSchema(doc, items, e, fmt.Sprintf("%s[%d]", at, i), false)...)
			}
		}
	case map[string]any:
		props, named := schema["properties"].(map[string]any)
		extra, _ := schema["additionalProperties"].(map[string]any)
		for k, e := range x {
			p, ok := props[k].(map[string]any)
			switch {
			case ok:
				errs = append(errs, checkSchema(doc, p, e, at+"."+k, false)...)
			case extra != nil:
				errs = append(errs, checkSchema(doc, extra, e, at+"."+k, false)...)
			case named && !open: // an object of no properties is free-form (metadata)
				errs = append(errs, fmt.Sprintf("%s.%s is not in the document", at, k))
			}
		}
		required, _ := schema["required"].([]any)
		for _, k := range required {
			if _, ok := x[k.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s.%s is required by the document, and missing", at, k))
			}
		}
	}
	return errs
}

// resolveRef is the part of doc that ref (#/…) names.
func resolveRef(doc map[string]any, ref string) (map[string]any, bool) {
	target := any(doc)
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, _ := target.(map[string]any)
		target = m[part]
	}
	s, ok := target.(map[string]any)
	return s, ok
}

// propertiesOf are the properties schema names, through its $ref and
// the parts of its allOf.
func propertiesOf(doc, schema map[string]any) map[string]any {
	if ref, ok := schema["$ref"].(string); ok {
		s, _ := resolveRef(doc, ref)
		return propertiesOf(doc, s)
	}
	props := map[string]any{}
	if parts, ok := schema["allOf"].([]any); ok {
		for _, part := range parts {
			maps.Copy(props, propertiesOf(doc, part.(map[string]any)))
		}
	}
	p, _ := schema["properties"].(map[string]any)
	maps.Copy(props, p)
	return props
}

// TestOpenAPI_ReconcileRunsAndDryRunDocumentEveryFieldTheyAnswer checks
// the answers of GET /v1/reconcile/runs, GET /v1/admin/overview (its
// event counts per kind included) and the dry run, with every kind's counts and a kind not read (null), against
// the OpenAPI document.
func TestOpenAPI_ReconcileRunsAndDryRunDocumentEveryFieldTheyAnswer(t *testing.T) {
	t.Parallel()
	h := newConsoleHarness(t, func(o *consoleOptions) {
		o.dryRun = func(ctx context.Context, onPage func(int, sync.Tally), onNote func(sync.Note)) (sync.ReconcileReport, error) {
			onPage(0, sync.Tally{Read: 2})
			onNote(sync.Note{Kind: models.KindUser, ID: "user_gone", Action: sync.NoteWouldDelete})
			onNote(sync.Note{Kind: models.KindOrganization, ID: "org_new", Action: sync.NoteWouldCreate})
			onNote(sync.Note{Kind: models.KindMembership, ID: "orgmem_bad", Action: sync.NoteFailed, Err: fmt.Errorf("%w: data.role", models.ErrInvalid)})
			return sync.ReconcileReport{Kinds: []sync.KindReport{
				{Kind: models.KindUser, Complete: true, Local: 2, Deleted: 1, Listed: sync.Tally{Read: 1, Unchanged: 1}},
				{Kind: models.KindOrganization, Complete: true, Local: -1, Listed: sync.Tally{Read: 1, Applied: 1}, DeletesSkipped: "1 listed organizations had no readable id"},
				{Kind: models.KindMembership, Complete: true, Off: true, Local: -1},
			}}, nil
		}
	})
	for _, r := range []models.ReconcileSummary{
		{Kind: "backfill", Trigger: "command", StartedAt: time.Now().Add(-time.Hour), Success: true,
			Memberships: &models.ReconcileCounts{Clerk: 3, Local: -1, Applied: 3}},
		{Kind: "reconcile", Trigger: "schedule", StartedAt: time.Now(), Error: "refused",
			Users:         &models.ReconcileCounts{Clerk: 3, Local: 3, Unchanged: 3},
			Organizations: &models.ReconcileCounts{Clerk: 1, Local: 4, Unchanged: 1, Refused: true, ToDelete: 3},
			Memberships:   &models.ReconcileCounts{Clerk: 1, Local: 1, Unchanged: 1}},
	} {
		if _, err := h.store.Runs().Record(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	var doc map[string]any
	decode(t, h.get("/openapi.json", ""), http.StatusOK, &doc)
	schemaOf := func(path, method, code string) map[string]any {
		t.Helper()
		op := doc["paths"].(map[string]any)[path].(map[string]any)[method].(map[string]any)
		s, ok := op["responses"].(map[string]any)[code].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		if !ok {
			t.Fatalf("the document has no JSON schema of %s %s %s", method, path, code)
		}
		return s
	}
	check := func(what string, r response, code int, schema map[string]any, part string) {
		t.Helper()
		var v any
		decode(t, r, code, &v)
		if part != "" {
			v, schema = v.(map[string]any)[part], schema["properties"].(map[string]any)[part].(map[string]any)
			what += " " + part
		}
		for _, e := range schemaErrors(doc, schema, v, what) {
			t.Error(e)
		}
	}
	check("GET /v1/reconcile/runs", h.get("/v1/reconcile/runs", testAdminKey), http.StatusOK, schemaOf("/v1/reconcile/runs", "get", "200"), "")
	check("GET /v1/admin/overview", h.get("/v1/admin/overview", testAdminKey), http.StatusOK, schemaOf("/v1/admin/overview", "get", "200"), "")
	check("POST /v1/reconcile/dry-run", h.call(http.MethodPost, "/v1/reconcile/dry-run", testAdminKey), http.StatusAccepted,
		schemaOf("/v1/reconcile/dry-run", "post", "202"), "")
	h.waitDryRun()
	check("GET /v1/reconcile/dry-run", h.get("/v1/reconcile/dry-run", testAdminKey), http.StatusOK, schemaOf("/v1/reconcile/dry-run", "get", "200"), "")
}

// TestOpenAPI_ActivityKindsAreTheOnesCounted checks the kinds the document
// lists for GET /v1/admin/activity against models.ActivityKinds.
func TestOpenAPI_ActivityKindsAreTheOnesCounted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Properties struct {
							Kinds struct {
								Items struct {
									Enum []string `json:"enum"`
								} `json:"items"`
							} `json:"kinds"`
						} `json:"properties"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	decode(t, h.get("/openapi.json", ""), http.StatusOK, &doc)
	got := doc.Paths["/v1/admin/activity"]["get"].Responses["200"].Content["application/json"].Schema.Properties.Kinds.Items.Enum
	if !slices.Equal(got, models.ActivityKinds) {
		t.Errorf("the document's activity kinds = %q, want %q", got, models.ActivityKinds)
	}
}
