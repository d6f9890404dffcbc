package api_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/usersync/usersync/internal/outboundtest"
	"github.com/usersync/usersync/models"
)

// TestOpenAPI_WebhooksDocumentEveryMessageTheServiceSends: an endpoint
// that wants every type receives, from the Clerk deliveries of
// testdata/outbound, each kind's creation, change and deletion and
// plan.changed, then the test message; each message is what the
// document's webhooks entry of its type says, and the document has an
// entry for every outbound type and no other.
func TestOpenAPI_WebhooksDocumentEveryMessageTheServiceSends(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	id := h.register(app)
	steps, err := outboundtest.Steps("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		before := len(app.messages())
		h.mustDeliver(newID(), s.Body)
		h.step()
		var got []string
		for _, m := range app.messages()[before:] {
			got = append(got, m.Type)
		}
		if want := slices.Sorted(slices.Values(s.Types)); !slices.Equal(slices.Sorted(slices.Values(got)), want) {
			t.Errorf("%s: messages %q, want %q", s.What, got, want)
		}
	}
	if r := h.send(http.MethodPost, "/v1/endpoints/"+id+"/test", ""); r.Code != http.StatusOK {
		t.Fatalf("test message: %s", r)
	}

	var doc map[string]any
	decode(t, h.get("/openapi.json", ""), http.StatusOK, &doc)
	webhooks, _ := doc["webhooks"].(map[string]any)
	want := append(models.OutboundTypes(), "usersync.test")
	if got := slices.Sorted(maps.Keys(webhooks)); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("the document's webhooks are %q, want the outbound types %q", got, want)
	}
	seen := map[string]bool{}
	for _, m := range app.messages() {
		seen[m.Type] = true
		entry, _ := webhooks[m.Type].(map[string]any)
		post, _ := entry["post"].(map[string]any)
		body, _ := post["requestBody"].(map[string]any)
		content, _ := body["content"].(map[string]any)
		media, _ := content["application/json"].(map[string]any)
		schema, ok := media["schema"].(map[string]any)
		if !ok {
			t.Errorf("%s: the document's webhooks have no JSON schema of it", m.Type)
			continue
		}
		var v any
		if err := json.Unmarshal(m.Body, &v); err != nil {
			t.Fatal(err)
		}
		for _, e := range schemaErrors(doc, schema, v, m.Type) {
			t.Error(e)
		}
	}
	for _, typ := range want {
		if !seen[typ] {
			t.Errorf("no %s message arrived: testdata/outbound/steps.json must make one of every type", typ)
		}
	}
}
