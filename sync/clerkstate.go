package sync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/usersync/usersync/models"
)

// clerkUserDelivery wraps a user object of Clerk's API in the envelope of
// a user.updated webhook carrying it, keeping its bytes as they are, so
// that applying it follows the webhook's ordering rules: it never
// overwrites a newer state and never revives a deleted user.
func clerkUserDelivery(raw json.RawMessage) (Delivery, error) {
	eventID, timestamp := clerkStateEventID(raw)
	body := make([]byte, 0, len(raw)+96)
	body = append(body, `{"object":"event","type":"user.updated","timestamp":`...)
	body = append(body, timestamp...)
	body = append(body, `,"data":`...)
	body = append(body, raw...)
	body = append(body, '}')
	ev, err := models.DecodeEvent(body)
	if err != nil {
		return Delivery{}, err
	}
	return Delivery{EventID: eventID, Signature: "", Body: body, Event: ev}, nil
}

// clerkStateEventID returns the event id of a state read from Clerk's API,
// backfill_<user id>_<updated_at>, so that a rerun finds the states it has
// applied already, and the user's updated_at as the envelope's timestamp.
// A user without a usable id or updated_at (it will fail validation) gets
// an id from a hash of its bytes, so that it is still recorded once.
func clerkStateEventID(raw json.RawMessage) (eventID string, timestamp []byte) {
	var u struct {
		ID        json.RawMessage `json:"id"`
		UpdatedAt json.RawMessage `json:"updated_at"`
	}
	_ = json.Unmarshal(raw, &u) // anything unusable is left empty
	var id string
	var at int64
	idOK := json.Unmarshal(u.ID, &id) == nil && id != "" && len(id) <= 128
	atOK := json.Unmarshal(u.UpdatedAt, &at) == nil && at > 0
	timestamp = []byte("null")
	if atOK {
		timestamp = strconv.AppendInt(nil, at, 10)
	}
	if idOK && atOK {
		return "backfill_" + id + "_" + string(timestamp), timestamp
	}
	sum := sha256.Sum256(raw)
	return "backfill_" + hex.EncodeToString(sum[:12]), timestamp
}

// IngestClerkDelete deletes userID through the same code as a webhook
// user.deleted stamped at: the user becomes a tombstone, and the event
// reconcile_delete_<userID>_<runID> is stored, unsigned, in the log.
// Errors are those of Ingest.
func (s *Service) IngestClerkDelete(ctx context.Context, userID, runID string, at time.Time) (Result, error) {
	id, err := json.Marshal(userID)
	if err != nil {
		return Result{}, err
	}
	body := make([]byte, 0, 160)
	body = append(body, `{"object":"event","type":"user.deleted","timestamp":`...)
	body = strconv.AppendInt(body, at.UnixMilli(), 10)
	body = append(body, `,"data":{"id":`...)
	body = append(body, id...)
	body = append(body, `,"object":"user","deleted":true}}`...)
	ev, err := models.DecodeEvent(body)
	if err != nil {
		return Result{}, err
	}
	return s.Ingest(ctx, Delivery{EventID: "reconcile_delete_" + userID + "_" + runID, Body: body, Event: ev})
}
