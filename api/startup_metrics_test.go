package api_test

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/repository/repotest"
)

// TestMetrics_EveryMetricTheDocsListIsThereFromStartUp checks the metrics
// table of docs/operations.md against a real /metrics.
func TestMetrics_EveryMetricTheDocsListIsThereFromStartUp(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, _ := strings.Cut(string(b), "\n## Metrics\n")
	table, _, _ = strings.Cut(table, "\n## ")
	names := regexp.MustCompile("(?m)^\\| `(usersync_[a-z_]+)").FindAllStringSubmatch(table, -1)
	if len(names) < 10 {
		t.Fatalf("found %d metrics in the table of docs/operations.md", len(names))
	}
	h := newHarness(t, func(o *harnessOptions) {
		o.store = repotest.NewStore(t)
		o.metrics = api.NewMetrics(o.store.Events())
	})
	r := h.get("/metrics", "")
	if r.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %s", r)
	}
	// Not before there is something to say: a request's series appears
	// with the request, and the event counts with the first read of them
	// (the background refresh reads them at start-up).
	later := map[string]bool{
		"usersync_http_request_duration_seconds": true,
		"usersync_events":                        true, "usersync_events_backlog": true, "usersync_events_gave_up": true,
		"usersync_events_backlog_by_kind": true, "usersync_events_gave_up_by_kind": true,
	}
	for _, m := range names {
		if later[m[1]] {
			continue
		}
		if !regexp.MustCompile(`(?m)^` + m[1] + `(_bucket|_sum|_count)?[{ ]`).Match(r.Body) {
			t.Errorf("%s is not in /metrics at start-up", m[1])
		}
	}
}
