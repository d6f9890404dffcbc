package sqlite

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestEventLog_BillingEventsAreFoundByTheirKindAndShortTypes: the event
// log filtered by a billing kind finds its events of every short type the
// kinds table gives it (active, ended, past_due…, not only created,
// updated and deleted), and filtered by such a type finds the events of
// each kind that has it, with a status too, page by page.
func TestEventLog_BillingEventsAreFoundByTheirKindAndShortTypes(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, ev := range []struct{ id, typ string }{
		{"msg_b1", models.TypeSubscriptionItemEnded},
		{"msg_b2", models.TypeSubscriptionItemActive},
		{"msg_b3", models.TypeSubscriptionActive},
		{"msg_b4", models.TypeSubscriptionPastDueLegacy},
		{"msg_b5", models.TypeSubscriptionItemFreeTrialEnding},
		{"msg_b6", models.TypeUserCreated},
		{"msg_b7", models.TypePaymentAttemptUpdated},
	} {
		if _, _, err := s.Events().Record(ctx, models.Event{EventID: ev.id, Type: ev.typ, EventType: models.EventTypeOf(ev.typ),
			RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		f    models.EventFilter
		want []string
	}{
		{models.EventFilter{Kind: models.KindSubscriptionItem}, []string{"msg_b5", "msg_b2", "msg_b1"}},
		{models.EventFilter{EventType: models.EventEnded}, []string{"msg_b1"}},
		{models.EventFilter{Kind: models.KindSubscriptionItem, EventType: models.EventEnded}, []string{"msg_b1"}},
		{models.EventFilter{Kind: models.KindSubscription}, []string{"msg_b4", "msg_b3"}},
		{models.EventFilter{EventType: models.EventActive}, []string{"msg_b3", "msg_b2"}},
		{models.EventFilter{EventType: models.EventPastDue}, []string{"msg_b4"}},
		{models.EventFilter{EventType: models.EventUpdated}, []string{"msg_b7"}},
		{models.EventFilter{Status: models.StatusStored, Kind: models.KindSubscriptionItem}, []string{"msg_b5", "msg_b2", "msg_b1"}},
		{models.EventFilter{Status: models.StatusStored, EventType: models.EventEnded}, []string{"msg_b1"}},
		{models.EventFilter{Status: models.StatusFailed, Kind: models.KindSubscriptionItem}, nil},
	} {
		// A page of one at a time: the ranges are merged in the log's order.
		var got []string
		f := c.f
		f.Limit = 1
		for range 10 {
			page, err := s.Events().List(ctx, f)
			if err != nil {
				t.Fatalf("List(%+v): %v", f, err)
			}
			for _, ev := range page.Events {
				got = append(got, ev.EventID)
			}
			if page.NextCursor == "" {
				break
			}
			f.After = page.NextCursor
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
}
