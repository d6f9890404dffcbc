package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/outbound"
)

func TestOutbound_MetricsNameEachEndpointAndForgetADeletedOne(t *testing.T) {
	t.Parallel()
	h, metrics := newMetricsHarness(t)
	now := time.Now()
	old := now.Add(-20 * time.Minute)
	a := models.Endpoint{ID: "ep_a", Enabled: true}
	b := models.Endpoint{ID: "ep_b", Enabled: false, Disabled: models.DisabledGone}
	metrics.Outbound().Attempted("ep_a", outbound.Retry, 2*time.Second)
	metrics.Outbound().Attempted("ep_b", outbound.Gone, time.Millisecond)
	outbox := now.Add(-90 * time.Second)
	metrics.Outbound().Backlog([]models.Endpoint{a, b}, map[string]models.Backlog{"ep_a": {Pending: 3, Oldest: &old}}, &outbox, now)
	body := string(h.get("/metrics", "").Body)
	for _, want := range []string{
		`usersync_outbound_attempts_total{endpoint="ep_a",result="retry"} 1`,
		`usersync_outbound_backlog{endpoint="ep_a"} 3`,
		`usersync_outbound_oldest_pending_seconds{endpoint="ep_a"} 1200`,
		`usersync_outbound_endpoint_disabled{endpoint="ep_b"} 1`,
		`usersync_outbound_endpoint_disabled{endpoint="ep_a"} 0`,
		`usersync_outbound_outbox_oldest_seconds 90`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// ep_b is deleted: its series go.
	metrics.Outbound().Backlog([]models.Endpoint{a}, nil, nil, now)
	if body := string(h.get("/metrics", "").Body); strings.Contains(body, `endpoint="ep_b"`) {
		t.Errorf("a deleted endpoint's series stay")
	}
}
