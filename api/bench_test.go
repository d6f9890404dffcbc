package api_test

// The benchmark drives the real router (package api_test) rather than the
// handler's unexported pieces: what a delivery costs in process is the
// whole path a request takes (Echo routing, request id, logging, metrics,
// raw-body read, Svix verification, envelope decode, the sync service's
// validation and decision, the JSON answer), and the unexported pieces
// change more often than the route does. Only the engine is left out, by
// stores that answer at once.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// instantEvents is an event inbox that has nothing and answers at once.
type instantEvents struct{}

func (instantEvents) MarkFailed(context.Context, string, string, *time.Time) error { return nil }

func (instantEvents) Get(context.Context, string) (models.Event, error) {
	return models.Event{}, models.ErrNotFound
}

func (instantEvents) Claim(context.Context, string, int, time.Time, time.Duration) (bool, error) {
	return true, nil
}

// instantStore stores nothing and applies every change at once: every
// delivery is new.
type instantStore struct{}

func (instantStore) Deliver(_ context.Context, ev models.Event, _ models.Change, _ time.Time) (models.Delivered, error) {
	ev.ID = "65f000000000000000000001"
	ev.Status, ev.Outcome = models.StatusProcessed, models.OutcomeApplied
	return models.Delivered{Event: ev, Created: true, Outcome: models.OutcomeApplied}, nil
}

func (instantStore) Reapply(_ context.Context, ev models.Event, _ models.Change, _ time.Time) (models.Delivered, error) {
	return models.Delivered{Event: ev, Outcome: models.OutcomeApplied}, nil
}

// instantIngester answers every delivery as processed without looking at it.
type instantIngester struct{}

func (instantIngester) Ingest(_ context.Context, d sync.Delivery) (sync.Result, error) {
	return sync.Result{EventID: d.EventID, Status: models.StatusProcessed, Outcome: models.OutcomeApplied}, nil
}

func (instantIngester) Replay(context.Context, []models.Event, time.Duration, func(sync.Replayed)) error {
	return nil
}

// BenchmarkWebhook_InProcess measures one signed ~2 KB user.updated
// delivery through the router, without the engine:
//   - "sync" runs the real sync service over stores that answer at once:
//     verification, decode, validation and the decision;
//   - "ingester-only" hands the verified, decoded event to an ingester that
//     answers at once, which leaves validation and the decision out.
func BenchmarkWebhook_InProcess(b *testing.B) {
	// Clerk's user.updated as Svix posts it: compact JSON, about 2 KB.
	var compact bytes.Buffer
	if err := json.Compact(&compact, fixture(b, "user.updated.json")); err != nil {
		b.Fatal(err)
	}
	body := compact.Bytes()
	signedAt := time.Now()
	hdr := sign(b, testSecret, "msg_2SS3GP5uCLsVbWT7oYxXBzHtBvP", signedAt, body)
	hdr.Set("Content-Type", "application/json")

	for _, tc := range []struct {
		name string
		sync api.Ingester
	}{
		{"sync", sync.New(instantEvents{}, instantStore{}, nil)},
		{"ingester-only", instantIngester{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e, err := api.New(api.Config{
				Sync:           tc.sync,
				Logger:         slog.New(slog.NewJSONHandler(io.Discard, nil)), // formats as in production
				WebhookSecrets: []string{testSecret},
				APIKeys:        []string{testAPIKey},
				// The server's clock stays at the signing time, so that a long
				// run never leaves the 5-minute tolerance.
				Now: func() time.Time { return signedAt },
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/webhooks/clerk", bytes.NewReader(body))
				req.Header = hdr
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("webhook answered %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
