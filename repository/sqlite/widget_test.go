package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/storetest"
	"github.com/usersync/usersync/sync"
)

// The embedded store's side of the behaviour suite's test-only kind: its
// table and its write, added as a kind's are (see storetest.KindWidget).
func init() {
	appliers[storetest.KindWidget] = func(t *wtx, ch models.Change, now time.Time) (models.Outcome, error) {
		return applyWidget(t, ch.(storetest.WidgetChange), now)
	}
	storetest.AddWidgets(storetest.WidgetStore{
		Apply: func(ctx context.Context, s repository.Store, ch storetest.WidgetChange, now time.Time) (models.Outcome, error) {
			return s.(*Store).apply(ctx, ch, now)
		},
		Version: func(ctx context.Context, s repository.Store, id string) (*models.Version, error) {
			var v *models.Version
			err := s.(*Store).write(ctx, func(t *wtx) error {
				if err := createWidgets(t); err != nil {
					return err
				}
				var err error
				v, _, err = readVersion(t, qWidgetVersion, id)
				return err
			})
			return v, err
		},
	})
}

const qWidgetVersion = `SELECT source_updated_at, last_event_id, deleted_at FROM widgets WHERE widget_id = ?`

// createWidgets makes the widgets table, the first time a test writes.
func createWidgets(t *wtx) error {
	_, err := t.exec(`CREATE TABLE IF NOT EXISTS widgets (widget_id TEXT PRIMARY KEY, name TEXT,
		source_updated_at INTEGER NOT NULL, last_event_id TEXT NOT NULL, deleted_at INTEGER) STRICT`)
	return err
}

// applyWidget writes ch to its widget as models.Decide says.
func applyWidget(t *wtx, ch storetest.WidgetChange, now time.Time) (models.Outcome, error) {
	if len(ch.Name) > storetest.MaxWidgetName {
		return "", fmt.Errorf("widget %q name: %w: longer than %d bytes", ch.WidgetID, models.ErrInvalid, storetest.MaxWidgetName)
	}
	if err := createWidgets(t); err != nil {
		return "", err
	}
	cur, _, err := readVersion(t, qWidgetVersion, ch.WidgetID)
	if err != nil {
		return "", err
	}
	d := models.Decide(cur, ch.Version())
	if !d.Writes() {
		return d.Outcome(), nil
	}
	var deleted any
	if ch.Deleted {
		deleted = ms(ch.SourceTime)
	}
	_, err = t.exec(`INSERT INTO widgets (widget_id, name, source_updated_at, last_event_id, deleted_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (widget_id) DO UPDATE SET name = excluded.name, source_updated_at = excluded.source_updated_at,
		last_event_id = excluded.last_event_id, deleted_at = excluded.deleted_at`,
		ch.WidgetID, ch.Name, ms(ch.SourceTime), ch.EventID, deleted)
	return d.Outcome(), err
}

// TestWidget_AKindAddedByItsRowIsIngestedLoggedAndCounted: the test-only
// kind, added by its row, Change type, JSON shape and table alone, goes
// through the sync service as every kind does: decoded by its row, applied
// by Deliver under the ordering rules, found by the event log's kind
// filter, counted per kind.
func TestWidget_AKindAddedByItsRowIsIngestedLoggedAndCounted(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(ctx) })
	svc := sync.New(s.Events(), s, nil)
	at := time.Now().Add(-time.Hour).UnixMilli()
	for _, tc := range []struct {
		id, body string
		status   models.EventStatus
		outcome  models.Outcome
	}{
		{"msg_w1", fmt.Sprintf(`{"type":"widget.created","timestamp":%d,"data":{"id":"wdg_1","name":"One","updated_at":%d}}`, at, at),
			models.StatusProcessed, models.OutcomeApplied},
		{"msg_w2", fmt.Sprintf(`{"type":"widget.deleted","timestamp":%d,"data":{"id":"wdg_1"}}`, at+2),
			models.StatusProcessed, models.OutcomeApplied},
		{"msg_w3", fmt.Sprintf(`{"type":"widget.updated","timestamp":%d,"data":{"id":"wdg_1","name":"Late","updated_at":%d}}`, at+1, at+1),
			models.StatusProcessed, models.OutcomeDeleted},
		{"msg_w4", `{"type":"widget.updated","timestamp":1,"data":{"name":"No id"}}`, models.StatusFailed, ""},
	} {
		ev, err := models.DecodeEvent([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Ingest(ctx, sync.Delivery{EventID: tc.id, Body: []byte(tc.body), Event: ev})
		if res.Status != tc.status || res.Outcome != tc.outcome || (err != nil) != (tc.status == models.StatusFailed) {
			t.Errorf("%s: Ingest = %+v, %v; want %s %s", tc.id, res, err, tc.status, tc.outcome)
		}
	}
	page, err := s.Events().List(ctx, models.EventFilter{Kind: storetest.KindWidget, Limit: 10})
	if err != nil || len(page.Events) != 4 || page.Events[0].ObjectID != "" || page.Events[1].ObjectID != "wdg_1" {
		t.Errorf("the widgets' event log = %+v, %v; want its 4 events, newest first", page.Events, err)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByKind[storetest.KindWidget] != (models.KindStats{Failed: 1, GaveUp: 1}) {
		t.Errorf("stats = %+v, %v; want the widget's failed event counted under its kind", st.ByKind, err)
	}
}
