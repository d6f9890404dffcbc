package api_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// dashboard is the shape of deploy/grafana/usersync.json that the test
// reads: its panels, rows included, and their queries.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		GridPos struct {
			H, W, X, Y int
		} `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestGrafanaDashboard_NamesOnlyMetricsUsersyncServesAndEveryAlertsOne:
// the example dashboard parses, each panel's queries use only metrics (and
// labels) a real /metrics serves, and it draws every metric the example
// alerting rules alert on.
func TestGrafanaDashboard_NamesOnlyMetricsUsersyncServesAndEveryAlertsOne(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/grafana/usersync.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("usersync.json: %v", err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("the dashboard has no title or uid: %q, %q", d.Title, d.UID)
	}
	series := exposedSeries(t)
	drawn := map[string]bool{}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %d (%q): no title, or not on the 24-column grid: %+v", p.ID, p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			checkExpr(t, "panel "+p.Title, q.Expr, series)
			for _, m := range seriesRef.FindAllStringSubmatch(q.Expr, -1) {
				drawn[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m[1], "_bucket"), "_count"), "_sum")] = true
			}
		}
	}
	if queries < 20 {
		t.Errorf("only %d queries", queries)
	}
	rules, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(rules, &rf); err != nil {
		t.Fatal(err)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			for _, m := range seriesRef.FindAllStringSubmatch(r.Expr, -1) {
				if !drawn[m[1]] {
					t.Errorf("the dashboard draws no %s, which %s alerts on", m[1], r.Alert)
				}
			}
		}
	}
}
