package api_test

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/sync"
)

// ruleFile is the shape of a Prometheus rule file, only the fields the
// example rules use; any other field is an error.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// promFunctions are the PromQL functions, aggregations and keywords the
// example rules may use before a parenthesis.
var promFunctions = map[string]bool{
	"sum": true, "max": true, "min": true, "avg": true, "count": true, "rate": true, "increase": true,
	"time": true, "absent": true, "clamp_min": true, "by": true, "on": true, "without": true, "ignoring": true,
	"histogram_quantile": true,
}

var (
	seriesRef  = regexp.MustCompile(`\b((?:usersync|process|go)_[a-z0-9_]+)(\{([^}]*)\})?`)
	callRef    = regexp.MustCompile(`\b([a-z_]+)\s*\(`)
	rangeRef   = regexp.MustCompile(`\[([^\]]*)\]`)
	matcherRef = regexp.MustCompile(`^([a-z_]+)(=~|!~|!=|=)"[^"]*"$`)
)

// exposedSeries scrapes a server that has seen some traffic and returns
// every metric name it serves with the label names of each.
func exposedSeries(t *testing.T) map[string]map[string]bool {
	t.Helper()
	h, metrics := newMetricsHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_alerts", UpdatedAt: t0}))
	metrics.ObserveRecovery(sync.Report{SweepDone: true})
	if err := metrics.RefreshStats(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The outbound series of an endpoint, as the dispatcher feeds them.
	ep := models.Endpoint{ID: "ep_alerts", Enabled: true}
	metrics.Outbound().Attempted(ep.ID, outbound.Delivered, time.Millisecond)
	metrics.Outbound().Backlog([]models.Endpoint{ep}, map[string]models.Backlog{}, nil, time.Now())
	body := h.get("/metrics", "").Body
	series := map[string]map[string]bool{}
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? `)
	for _, line := range bytes.Split(body, []byte("\n")) {
		m := sample.FindSubmatch(line)
		if m == nil {
			continue
		}
		name := string(m[1])
		if series[name] == nil {
			series[name] = map[string]bool{}
		}
		for _, kv := range regexp.MustCompile(`([a-zA-Z_]+)="`).FindAllSubmatch(m[2], -1) {
			series[name][string(kv[1])] = true
		}
	}
	return series
}

func TestAlertRules_ParseAndUseOnlyMetricsUsersyncServes(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	series := exposedSeries(t)
	alerts := map[string]bool{}
	var rules int
	for _, g := range rf.Groups {
		if g.Name == "" {
			t.Error("a group without a name")
		}
		for _, r := range g.Rules {
			rules++
			if r.Alert == "" || alerts[r.Alert] {
				t.Errorf("alert name %q is empty or used twice", r.Alert)
			}
			alerts[r.Alert] = true
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: needs a severity label and a summary annotation", r.Alert)
			}
			checkExpr(t, r.Alert, r.Expr, series)
		}
	}
	for _, want := range []string{"UsersyncWebhooksSilent", "UsersyncBacklog", "UsersyncWebhookFailures", "UsersyncEngineErrors"} {
		if !alerts[want] {
			t.Errorf("no %s rule", want)
		}
	}
	if rules == 0 {
		t.Fatal("no rules")
	}
}

// checkExpr checks what can be checked of a PromQL expression without a
// PromQL parser: balanced brackets and quotes, known functions, valid
// range durations, and series and label names that usersync serves.
func checkExpr(t *testing.T, alert, expr string, series map[string]map[string]bool) {
	t.Helper()
	if strings.TrimSpace(expr) == "" {
		t.Errorf("%s: empty expression", alert)
		return
	}
	var stack []rune
	inString := false
	for _, c := range expr {
		if c == '"' {
			inString = !inString
		}
		if inString {
			continue
		}
		switch c {
		case '(', '[', '{':
			stack = append(stack, c)
		case ')', ']', '}':
			open := map[rune]rune{')': '(', ']': '[', '}': '{'}[c]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				t.Errorf("%s: unbalanced %q in %s", alert, c, expr)
				return
			}
			stack = stack[:len(stack)-1]
		}
	}
	if inString || len(stack) > 0 {
		t.Errorf("%s: unclosed quote or bracket in %s", alert, expr)
	}
	for _, m := range callRef.FindAllStringSubmatch(expr, -1) {
		if !promFunctions[m[1]] {
			t.Errorf("%s: unknown function %s", alert, m[1])
		}
	}
	for _, m := range rangeRef.FindAllStringSubmatch(expr, -1) {
		if _, err := time.ParseDuration(m[1]); err != nil {
			t.Errorf("%s: range [%s]: %v", alert, m[1], err)
		}
	}
	refs := seriesRef.FindAllStringSubmatch(expr, -1)
	if len(refs) == 0 {
		t.Errorf("%s: uses no metric", alert)
	}
	for _, m := range refs {
		labels, ok := series[m[1]]
		if !ok {
			t.Errorf("%s: usersync serves no metric %s", alert, m[1])
			continue
		}
		if m[3] == "" {
			continue
		}
		for _, matcher := range strings.Split(m[3], ",") {
			lm := matcherRef.FindStringSubmatch(strings.TrimSpace(matcher))
			if lm == nil {
				t.Errorf("%s: bad label matcher %q", alert, matcher)
			} else if !labels[lm[1]] {
				t.Errorf("%s: %s has no label %s", alert, m[1], lm[1])
			}
		}
	}
}
