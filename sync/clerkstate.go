package sync

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/usersync/usersync/models"
)

// clerkStateDelivery wraps an object of kind k read from Clerk's API (a
// user, an organization, a membership, an invitation…) in the envelope of
// the webhook carrying it (models.StateType: the .updated one, or for an
// invitation the one of its status), keeping its bytes as they are, so that applying it
// follows the webhook's ordering rules: it never overwrites a newer state
// and never revives a deleted object.
func clerkStateDelivery(k models.Kind, raw json.RawMessage) (Delivery, error) {
	eventID, timestamp := clerkStateEventID(raw)
	typ := models.StateType(k, raw)
	body := make([]byte, 0, len(raw)+112)
	body = append(body, `{"object":"event","type":"`...)
	body = append(body, typ...)
	body = append(body, `","timestamp":`...)
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
// backfill_<object id>_<updated_at>, so that a rerun finds the states it
// has applied already, and the object's updated_at as the envelope's
// timestamp. Ids of users, organizations and memberships differ by their
// prefix, so their event ids never meet. An object without a usable id or
// updated_at (it will fail validation) gets an id from a hash of its
// bytes, so that it is still recorded once.
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

// clerkDeletion is the delivery of the webhook deletion of the object id
// of kind k stamped at, as the event reconcile_delete_<id>_<runID>,
// unsigned: a user.deleted, organization.deleted or
// organizationMembership.deleted of Clerk's shape. A membership's carries
// its organization and user (orgID, userID, when known), so that the event
// is found among its member's and erased with them.
func clerkDeletion(k models.Kind, id, orgID, userID, runID string, at time.Time) (Delivery, error) {
	spec, _ := models.SpecOf(k)
	typ := spec.TypeOf(models.EventDeleted)
	data := map[string]any{"id": id, "deleted": true, "object": spec.Object}
	if orgID != "" { // a membership's
		data["organization"] = map[string]any{"id": orgID, "object": "organization"}
	}
	if userID != "" {
		data["public_user_data"] = map[string]any{"user_id": userID}
	}
	body, err := json.Marshal(struct {
		Object    string         `json:"object"`
		Type      string         `json:"type"`
		Timestamp int64          `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}{"event", typ, at.UnixMilli(), data})
	if err != nil {
		return Delivery{}, err
	}
	ev, err := models.DecodeEvent(body)
	if err != nil {
		return Delivery{}, err
	}
	return Delivery{EventID: "reconcile_delete_" + id + "_" + runID, Body: body, Event: ev}, nil
}
