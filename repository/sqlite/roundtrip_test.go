package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// TestRoundTrips_PerDeliveryKind counts, and prints, the writes one
// delivery asks of the embedded store: one short transaction (shared with
// the writes of concurrent deliveries) that stores, applies and marks it
// (Users.Deliver); a duplicate of a processed event is that one write,
// which finds it. Reads on the webhook path are inside it.
func TestRoundTrips_PerDeliveryKind(t *testing.T) {
	ctx := context.Background()
	const t0 = int64(1_760_000_000_000)
	body := func(typ string, at int64, email string) []byte {
		return fmt.Appendf(nil, `{"type":%q,"timestamp":%d,"data":{"id":"user_rt","updated_at":%d,"primary_email_address_id":"idn_1","email_addresses":[{"id":"idn_1","email_address":%q}]}}`,
			typ, at, at, email)
	}
	bodies := map[string][]byte{
		"created": body("user.created", t0, "rt@example.com"),
		"updated": body("user.updated", t0+1000, "rt2@example.com"),
		"old":     body("user.updated", t0-1000, "rt0@example.com"),
	}
	for _, tc := range []struct {
		name   string
		before [][2]string
		id     string
		body   string
		want   int64
	}{
		{"new user", nil, "msg_a", "created", 1},
		{"update", [][2]string{{"msg_a", "created"}}, "msg_b", "updated", 1},
		{"duplicate", [][2]string{{"msg_a", "created"}}, "msg_a", "created", 1},
		{"stale", [][2]string{{"msg_a", "created"}, {"msg_b", "updated"}}, "msg_c", "old", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, t.TempDir(), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			svc := sync.New(s.Events(), s, nil)
			deliver := func(id, kind string) {
				t.Helper()
				ce, err := models.DecodeEvent(bodies[kind])
				if err != nil {
					t.Fatal(err)
				}
				if _, err := svc.Ingest(ctx, sync.Delivery{EventID: id, Signature: "v1,x", Body: bodies[kind], Event: ce}); err != nil {
					t.Fatal(err)
				}
			}
			for _, d := range tc.before {
				deliver(d[0], d[1])
			}
			before := s.writes.Load()
			deliver(tc.id, tc.body)
			got := s.writes.Load() - before
			t.Logf("%s: %d writes", tc.name, got)
			if got != tc.want {
				t.Errorf("%s: %d writes, want %d", tc.name, got, tc.want)
			}
		})
	}
}
