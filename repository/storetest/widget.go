package storetest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// KindWidget is the behaviour suite's test-only kind, added the way every
// kind is: a row in the kinds table (AddWidgets), a Change type
// (WidgetChange), its JSON shape (DecodeWidget), and each store's table
// or collection with its write, which the store's tests give (WidgetStore).
// The suite's per-kind promises (its Deliver_ tests) then hold for it
// without a line of theirs changed.
const KindWidget models.Kind = "widget"

// MaxWidgetName bounds a widget's name, in bytes: a store refuses a
// longer one (models.ErrInvalid), which gives the suite a change that can
// never apply.
const MaxWidgetName = 64

// WidgetChange is one state of one widget.
type WidgetChange struct {
	WidgetID   string
	EventID    string
	SourceTime time.Time
	Deleted    bool
	Name       string
}

// Kind returns KindWidget.
func (WidgetChange) Kind() models.Kind { return KindWidget }

// Version returns the version of the state ch carries.
func (ch WidgetChange) Version() models.Version {
	return models.Version{SourceTime: ch.SourceTime, EventID: ch.EventID, Deleted: ch.Deleted}
}

// IDs returns the widget's id: a widget's events name no user.
func (ch WidgetChange) IDs() (userID, objectID string) { return "", ch.WidgetID }

// DecodeWidget is the widget kind's JSON shape: data.id, data.name and
// data.updated_at (Unix milliseconds) of widget.created and
// widget.updated, data.id and the envelope's timestamp of widget.deleted.
func DecodeWidget(e models.ClerkEvent, eventID string, now time.Time) (models.Change, error) {
	var d struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		UpdatedAt int64  `json:"updated_at"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || d.ID == "" {
		return nil, models.Public(models.ErrInvalid, "data must be an object with an id").In("data")
	}
	ch := WidgetChange{WidgetID: d.ID, EventID: eventID, Name: d.Name, SourceTime: time.UnixMilli(d.UpdatedAt).UTC()}
	if e.EventType() == models.EventDeleted {
		var ts int64
		if err := json.Unmarshal(e.Timestamp, &ts); err != nil {
			return nil, models.Public(models.ErrInvalid, "timestamp must be a number").In("timestamp")
		}
		ch = WidgetChange{WidgetID: d.ID, EventID: eventID, Deleted: true, SourceTime: time.UnixMilli(ts).UTC()}
	}
	if ch.SourceTime.After(now.Add(models.MaxFutureSkew)) {
		return nil, models.Public(models.ErrInvalid, "the state is from the future").In("data.updated_at")
	}
	return ch, nil
}

// WidgetStore is a store's side of the widget kind.
type WidgetStore struct {
	// Apply writes ch as the store's Deliver does, through its write of
	// the kind (outside any delivery: a crash before the mark).
	Apply func(ctx context.Context, s repository.Store, ch WidgetChange, now time.Time) (models.Outcome, error)
	// Version reads a widget's stored version; nil for an unknown one.
	Version func(ctx context.Context, s repository.Store, widgetID string) (*models.Version, error)
}

// AddWidgets adds the widget kind to the kinds table, with the store's
// side w, so that the suite's per-kind promises run on it too. Call it
// from an init function of the store's tests, once per test binary.
func AddWidgets(w WidgetStore) {
	models.AddKind(models.KindSpec{Kind: KindWidget, Plural: "widgets", IDPrefix: "wdg_", Object: "widget",
		Types: []models.TypeSpec{
			{Type: "widget.created", Change: models.EventCreated},
			{Type: "widget.updated", Change: models.EventUpdated},
			{Type: "widget.deleted", Change: models.EventDeleted},
		}}, DecodeWidget)
	state := func(id string, at time.Duration) WidgetChange {
		return WidgetChange{WidgetID: "wdg_dl", EventID: id, SourceTime: t0.Add(at), Name: "Widget " + id}
	}
	kindFixtures[KindWidget] = kindFixture{
		state: func(id string, at time.Duration) models.Change { return state(id, at) },
		deletion: func(id string, at time.Duration) models.Change {
			return WidgetChange{WidgetID: "wdg_dl", EventID: id, SourceTime: t0.Add(at), Deleted: true}
		},
		broken: func(id string, at time.Duration) models.Change {
			ch := state(id, at)
			for len(ch.Name) <= MaxWidgetName {
				ch.Name += ch.Name
			}
			return ch
		},
		version: func(ctx context.Context, s repository.Store) (*models.Version, error) {
			return w.Version(ctx, s, "wdg_dl")
		},
		apply: func(ctx context.Context, s repository.Store, ch models.Change) (models.Outcome, error) {
			return w.Apply(ctx, s, ch.(WidgetChange), time.Now())
		},
	}
}
