package mongo

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
)

// matches evaluates filter on doc as MongoDB does, for the operators the
// store's conditional writes and pages use: equality (null matching a
// missing field), $ne, $lt, $lte, $gt, $gte, $exists, $in (of strings),
// $or and $nor, on strings, times and ObjectIDs.
func matches(t *testing.T, filter bson.D, doc map[string]any) bool {
	t.Helper()
	for _, e := range filter {
		switch e.Key {
		case "$or", "$nor":
			any := false
			for _, sub := range e.Value.(bson.A) {
				any = any || matches(t, sub.(bson.D), doc)
			}
			if any != (e.Key == "$or") {
				return false
			}
			continue
		}
		v, present := doc[e.Key]
		ops, isOps := e.Value.(bson.D)
		if !isOps || len(ops) == 0 || ops[0].Key[0] != '$' {
			if !equal(e.Value, v, present) {
				return false
			}
			continue
		}
		for _, op := range ops {
			ok := false
			switch op.Key {
			case "$ne":
				ok = !equal(op.Value, v, present)
			case "$exists":
				ok = present == op.Value.(bool)
			case "$in":
				for _, x := range op.Value.([]string) {
					ok = ok || equal(x, v, present)
				}
			case "$lt", "$lte", "$gt", "$gte":
				if present && v != nil {
					c := compare(t, v, op.Value)
					ok = map[string]bool{"$lt": c < 0, "$lte": c <= 0, "$gt": c > 0, "$gte": c >= 0}[op.Key]
				}
			default:
				t.Fatalf("operator %s not modelled", op.Key)
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

func equal(want, v any, present bool) bool {
	if want == nil {
		return !present || v == nil
	}
	return present && v != nil && fmt.Sprint(want) == fmt.Sprint(v)
}

func compare(t *testing.T, a, b any) int {
	switch a := a.(type) {
	case time.Time:
		return a.Compare(b.(time.Time))
	case bson.ObjectID:
		b := b.(bson.ObjectID)
		return bytes.Compare(a[:], b[:])
	case string:
		switch {
		case a < b.(string):
			return -1
		case a > b.(string):
			return 1
		}
		return 0
	}
	t.Fatalf("cannot compare %T", a)
	return 0
}

// stored is a user document as the conditional writes see it.
func stored(userID string, v models.Version, email string) map[string]any {
	d := map[string]any{
		"_id": docID(userID), "userId": userID,
		"sourceUpdatedAt": v.SourceTime.UTC(), "lastEventId": v.EventID, "deletedAt": nil,
	}
	if v.Deleted {
		d["deletedAt"] = v.SourceTime.UTC()
	}
	if email != "" {
		d["email"] = email
	}
	return d
}

var filterT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// versions and changes around one another in time, event id and deletion.
func filterCases() (vs []models.Version, chs []models.UserChange) {
	for _, at := range []time.Duration{-time.Second, 0, time.Second} {
		for _, id := range []string{"msg_a", "msg_b", "msg_c"} {
			for _, del := range []bool{false, true} {
				vs = append(vs, models.Version{SourceTime: filterT0.Add(at), EventID: id, Deleted: del})
				chs = append(chs, models.UserChange{UserID: "user_x", EventID: id, SourceTime: filterT0.Add(at), Deleted: del,
					Email: "x@example.com", Metadata: []byte(`{}`)})
			}
		}
	}
	return vs, chs
}

// TestUserWriteFilter_IsDecidesUpdate checks, without a server, that the
// filter of Apply's upsert matches an existing user exactly when
// models.Decide says DecideUpdate: the rules are written once, in Decide,
// and the filter says the same.
func TestUserWriteFilter_IsDecidesUpdate(t *testing.T) {
	vs, chs := filterCases()
	for _, v := range vs {
		for _, ch := range chs {
			w, err := newUserWrite(ch, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			got := matches(t, w.filter, stored("user_x", v, "x@example.com"))
			if want := models.Decide(&v, ch.Version()) == models.DecideUpdate; got != want {
				t.Errorf("stored %+v, change %s at %v (deleted %v): filter matches = %v, Decide says update = %v",
					v, ch.EventID, ch.SourceTime, ch.Deleted, got, want)
			}
		}
	}
}

// TestTakeEmailFilter_IsTakesEmailFrom checks that the filter that takes
// an email from its holder matches exactly the other active users holding
// it whose state models.TakesEmailFrom says ch proves outdated.
func TestTakeEmailFilter_IsTakesEmailFrom(t *testing.T) {
	vs, chs := filterCases()
	for _, v := range vs {
		for _, ch := range chs {
			if ch.Deleted {
				continue
			}
			for _, holder := range []struct {
				user, email string
			}{{"user_h", ch.Email}, {"user_h", "other@example.com"}, {ch.UserID, ch.Email}} {
				got := matches(t, takeEmailFilter(ch), stored(holder.user, v, holder.email))
				want := holder.user != ch.UserID && holder.email == ch.Email && !v.Deleted && models.TakesEmailFrom(ch, v)
				if got != want {
					t.Errorf("holder %s %s %+v, change %s at %v: filter matches = %v, want %v",
						holder.user, holder.email, v, ch.EventID, ch.SourceTime, got, want)
				}
			}
		}
	}
}

// TestOrganizationAndMembershipWriteFilters_AreDecidesUpdate checks, as
// for users, that the filters of the organizations' and memberships'
// upserts match a stored document exactly when models.Decide says
// DecideUpdate.
func TestOrganizationAndMembershipWriteFilters_AreDecidesUpdate(t *testing.T) {
	vs, chs := filterCases()
	for _, v := range vs {
		for _, ch := range chs {
			org := models.OrganizationChange{OrgID: "org_x", EventID: ch.EventID, SourceTime: ch.SourceTime, Deleted: ch.Deleted, Metadata: []byte(`{}`)}
			filter, _, err := orgWrite(org, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			want := models.Decide(&v, org.Version()) == models.DecideUpdate
			if got := matches(t, filter, stored("org_x", v, "")); got != want {
				t.Errorf("organization stored %+v, change %s at %v (deleted %v): filter matches = %v, Decide says update = %v",
					v, ch.EventID, ch.SourceTime, ch.Deleted, got, want)
			}
			mem := models.MembershipChange{MembershipID: "orgmem_x", OrgID: "org_x", UserID: "user_x", EventID: ch.EventID,
				SourceTime: ch.SourceTime, Deleted: ch.Deleted, Metadata: []byte(`{}`)}
			w, err := newMembershipWrite(mem, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			want = models.Decide(&v, mem.Version()) == models.DecideUpdate
			if got := matches(t, w.filter, stored("orgmem_x", v, "")); got != want {
				t.Errorf("membership stored %+v, change %s at %v (deleted %v): filter matches = %v, Decide says update = %v",
					v, ch.EventID, ch.SourceTime, ch.Deleted, got, want)
			}
		}
	}
}

// TestTakePairFilter_IsAnOlderOtherHolder checks that the filter that
// makes the holder of a pair a tombstone matches exactly another active
// membership of the pair whose state is older than the incoming one
// (models.Newer).
func TestTakePairFilter_IsAnOlderOtherHolder(t *testing.T) {
	vs, chs := filterCases()
	for _, v := range vs {
		for _, ch := range chs {
			if ch.Deleted || v.Deleted {
				continue // a tombstone has no activeKey
			}
			mem := models.MembershipChange{MembershipID: "orgmem_new", OrgID: "org_x", UserID: "user_x", EventID: ch.EventID, SourceTime: ch.SourceTime}
			for _, holder := range []struct{ id, key string }{
				{"orgmem_old", activeKey("org_x", "user_x")}, {"orgmem_old", activeKey("org_x", "user_y")}, {"orgmem_new", activeKey("org_x", "user_x")},
			} {
				doc := stored(holder.id, v, "")
				doc["membershipId"], doc["activeKey"] = holder.id, holder.key
				got := matches(t, takePairFilter(mem), doc)
				want := holder.id != mem.MembershipID && holder.key == activeKey("org_x", "user_x") &&
					models.Newer(mem.SourceTime, mem.EventID, v.SourceTime, v.EventID)
				if got != want {
					t.Errorf("holder %s %s %+v, change %s at %v: filter matches = %v, want %v",
						holder.id, holder.key, v, ch.EventID, ch.SourceTime, got, want)
				}
			}
		}
	}
}
