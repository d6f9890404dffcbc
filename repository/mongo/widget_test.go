package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/storetest"
)

// The MongoDB store's side of the behaviour suite's test-only kind: its
// collection and its write, added as a kind's are (see
// storetest.KindWidget).
func init() {
	appliers[storetest.KindWidget] = func(ctx context.Context, s *Store, ch models.Change, _ time.Time) (models.Outcome, error) {
		return applyWidget(ctx, s, ch.(storetest.WidgetChange))
	}
	storetest.AddWidgets(storetest.WidgetStore{
		Apply: func(ctx context.Context, s repository.Store, ch storetest.WidgetChange, now time.Time) (models.Outcome, error) {
			return s.(*Store).apply(ctx, ch, now)
		},
		Version: func(ctx context.Context, s repository.Store, id string) (*models.Version, error) {
			return widgetVersion(ctx, s.(*Store), id)
		},
	})
}

type widgetDoc struct {
	ID         string    `bson:"_id"`
	Name       string    `bson:"name"`
	SourceTime time.Time `bson:"sourceUpdatedAt"`
	EventID    string    `bson:"lastEventId"`
	Deleted    bool      `bson:"deleted"`
}

func widgets(s *Store) *mongo.Collection {
	return s.db.Collection(s.names.of("widgets"), options.Collection().SetReadPreference(readpref.Primary()))
}

func widgetVersion(ctx context.Context, s *Store, id string) (*models.Version, error) {
	var d widgetDoc
	err := widgets(s).FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err)
	}
	return &models.Version{SourceTime: d.SourceTime, EventID: d.EventID, Deleted: d.Deleted}, nil
}

// applyWidget reads the widget, decides as models.Decide says, and writes
// only over the state it read (a write that lost a race is made again).
func applyWidget(ctx context.Context, s *Store, ch storetest.WidgetChange) (models.Outcome, error) {
	if len(ch.Name) > storetest.MaxWidgetName {
		return "", fmt.Errorf("widget %q name: %w: longer than %d bytes", ch.WidgetID, models.ErrInvalid, storetest.MaxWidgetName)
	}
	for range maxApplyTries {
		cur, err := widgetVersion(ctx, s, ch.WidgetID)
		if err != nil {
			return "", err
		}
		d := models.Decide(cur, ch.Version())
		if !d.Writes() {
			return d.Outcome(), nil
		}
		doc := widgetDoc{ID: ch.WidgetID, Name: ch.Name, SourceTime: ch.SourceTime, EventID: ch.EventID, Deleted: ch.Deleted}
		if cur == nil {
			_, err = widgets(s).InsertOne(ctx, doc)
		} else {
			var res *mongo.UpdateResult
			res, err = widgets(s).ReplaceOne(ctx, bson.D{{Key: "_id", Value: ch.WidgetID}, {Key: "lastEventId", Value: cur.EventID}}, doc)
			if err == nil && res.MatchedCount == 0 {
				continue
			}
		}
		if mongo.IsDuplicateKeyError(err) {
			continue
		}
		if err != nil {
			return "", translate(err)
		}
		return d.Outcome(), nil
	}
	return "", fmt.Errorf("widget %q: %w", ch.WidgetID, models.ErrRetryLater)
}
