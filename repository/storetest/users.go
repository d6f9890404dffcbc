package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// The promises about users: Clerk's order and the tombstones in every order
// of arrival, the metadata kept exactly, one owner of an email at a time,
// the list, the change feed, the walk of reconcile, and deprovisioned users.

func change(userID, eventID string, at time.Duration, email string) models.UserChange {
	return models.UserChange{
		UserID: userID, EventID: eventID, SourceTime: t0.Add(at),
		Email: email, DisplayName: "Name " + eventID, Metadata: json.RawMessage(`{"e":"` + eventID + `"}`),
	}
}

func deletion(userID, eventID string, at time.Duration) models.UserChange {
	return models.UserChange{UserID: userID, EventID: eventID, SourceTime: t0.Add(at), Deleted: true}
}

func apply(t *testing.T, s repository.Store, ch models.UserChange) models.Outcome {
	t.Helper()
	o, err := s.Users().Apply(context.Background(), ch, time.Now())
	if err != nil {
		t.Fatalf("Apply(%s %s): %v", ch.UserID, ch.EventID, err)
	}
	return o
}

func get(t *testing.T, s repository.Store, userID string) models.User {
	t.Helper()
	u, err := s.Users().Get(context.Background(), userID)
	if err != nil {
		t.Fatalf("Get(%s): %v", userID, err)
	}
	return u
}

func testOrderingAndTombstones(t *testing.T, s repository.Store) {
	steps := []struct {
		ch   models.UserChange
		want models.Outcome
	}{
		{change("user_1", "msg_b", 2*time.Second, "a@example.com"), models.OutcomeApplied},
		{change("user_1", "msg_b", 2*time.Second, "a@example.com"), models.OutcomeApplied}, // the same event again
		{change("user_1", "msg_a", 1*time.Second, "old@example.com"), models.OutcomeStale},
		{change("user_1", "msg_c", 2*time.Second, "c@example.com"), models.OutcomeApplied}, // tie: larger event id wins
		{change("user_1", "msg_a2", 2*time.Second, "x@example.com"), models.OutcomeStale},
		{deletion("user_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{deletion("user_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{deletion("user_1", "msg_d2", 4*time.Second), models.OutcomeDeleted},
		{change("user_1", "msg_e", 9*time.Second, "c@example.com"), models.OutcomeDeleted},
		{deletion("user_2", "msg_f", 1*time.Second), models.OutcomeApplied}, // never seen: a tombstone
		{change("user_2", "msg_g", 9*time.Second, "c@example.com"), models.OutcomeDeleted},
		{change("user_3", "msg_h", 1*time.Second, "c@example.com"), models.OutcomeApplied}, // email free again
	}
	for i, st := range steps {
		if got := apply(t, s, st.ch); got != st.want {
			t.Fatalf("step %d: Apply(%s %s) = %q, want %q", i, st.ch.UserID, st.ch.EventID, got, st.want)
		}
	}
	u := get(t, s, "user_1")
	if u.DeletedAt == nil || !u.DeletedAt.Equal(t0.Add(3*time.Second)) || u.Email != "" || u.DisplayName != "user_1" ||
		string(u.Metadata) != "{}" || u.Profile != (models.Profile{}) {
		t.Errorf("deleted user_1 = %+v, want a tombstone deleted at Clerk's time", u)
	}
	if u2 := get(t, s, "user_2"); !u2.Deleted() {
		t.Errorf("user_2 = %+v, want a tombstone", u2)
	}
	if u3 := get(t, s, "user_3"); u3.Email != "c@example.com" || u3.Deleted() {
		t.Errorf("user_3 = %+v", u3)
	}
	if _, err := s.Users().Get(context.Background(), "user_none"); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("Get of an unknown user: %v, want ErrNotFound", err)
	}
}

// testEveryOrderEndsTheSame delivers created, updated and deleted, and
// created and updated, in every order.
func testEveryOrderEndsTheSame(t *testing.T, s repository.Store) {
	created := change("", "msg_1", time.Second, "")
	created.New = true
	updated := change("", "msg_2", 2*time.Second, "")
	deleted := deletion("", "msg_3", 3*time.Second)
	for i, order := range permutations([]models.UserChange{created, updated, deleted}) {
		user := fmt.Sprintf("user_cud%d", i)
		for _, ch := range order {
			ch.UserID = user
			apply(t, s, ch)
		}
		if u := get(t, s, user); !u.Deleted() || u.LastEventID != "msg_3" || u.DisplayName != user {
			t.Errorf("order %d ended in %+v, want the tombstone", i, u)
		}
	}
	for i, order := range permutations([]models.UserChange{created, updated}) {
		user := fmt.Sprintf("user_cu%d", i)
		for _, ch := range order {
			ch.UserID = user
			apply(t, s, ch)
		}
		if u := get(t, s, user); u.Deleted() || u.LastEventID != "msg_2" || u.DisplayName != "Name msg_2" {
			t.Errorf("order %d ended in %+v, want the update", i, u)
		}
	}
}

func testConcurrentStates(t *testing.T, s repository.Store) {
	ctx := context.Background()
	const versions = 4
	// Each user's last version, msg_4, deletes it or updates it.
	users := []struct {
		id      string
		deleted bool
	}{
		{"user_0", true}, {"user_1", false}, {"user_2", false}, {"user_3", true},
		{"user_4", false}, {"user_5", false}, {"user_6", true}, {"user_7", false},
		{"user_8", false}, {"user_9", true}, {"user_10", false}, {"user_11", false},
		{"user_12", true}, {"user_13", false}, {"user_14", false}, {"user_15", true},
		{"user_16", false}, {"user_17", false}, {"user_18", true}, {"user_19", false},
	}
	for _, u := range users {
		apply(t, s, change(u.id, "msg_0", 0, ""))
	}
	var wg stdsync.WaitGroup
	for _, u := range users {
		for v := 1; v <= versions; v++ {
			wg.Go(func() {
				ch := change(u.id, fmt.Sprintf("msg_%d", v), time.Duration(v)*time.Second, "")
				if v == versions && u.deleted {
					ch = deletion(ch.UserID, ch.EventID, time.Duration(v)*time.Second)
				}
				if _, err := s.Users().Apply(ctx, ch, time.Now()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for _, u := range users {
		got := get(t, s, u.id)
		if got.LastEventID != "msg_4" || u.deleted != got.Deleted() {
			t.Errorf("%s ended on %s (deleted %v), want msg_4 (deleted %v)", u.id, got.LastEventID, got.Deleted(), u.deleted)
		}
	}
}

func testMetadataRoundTrip(t *testing.T, s repository.Store) {
	meta := `{"a.b":1,"$set":{"x.y":[1,2.5,"z",null,true]},"%2E":"pct","":"empty","ü€😀":{"k\u0000":"nul"},"big":12345678901234,"neg":-3,"html":"<&>","arr":[{"$k":{}}],"b":false}`
	ch := change("user_m", "msg_m", time.Second, "")
	ch.Metadata = json.RawMessage(meta)
	apply(t, s, ch)
	u := get(t, s, "user_m")
	var got, want any
	if err := json.Unmarshal(u.Metadata, &got); err != nil {
		t.Fatalf("metadata %s: %v", u.Metadata, err)
	}
	_ = json.Unmarshal([]byte(meta), &want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("metadata = %s\nwant       %s", u.Metadata, meta)
	}
	if u.Email != "" {
		t.Errorf("email = %q, want none", u.Email)
	}
}

func testEmailUnique(t *testing.T, s repository.Store) {
	ctx := context.Background()
	apply(t, s, change("user_a", "msg_1", time.Second, "taken@example.com"))
	// A newer state that claims the email takes it: Clerk gives an email
	// one owner at a time, so user_a has given it up since.
	apply(t, s, change("user_b", "msg_2", 2*time.Second, "taken@example.com"))
	if a, b := get(t, s, "user_a"), get(t, s, "user_b"); a.Email != "" || b.Email != "taken@example.com" {
		t.Errorf("after a newer claim: user_a %q, user_b %q; want user_b to hold it", a.Email, b.Email)
	}
	// An older state that claims it does not: its own user gave it up.
	if o := apply(t, s, change("user_c", "msg_3", time.Second, "taken@example.com")); o != models.OutcomeApplied {
		t.Errorf("older claim: outcome %q, want applied (without the email)", o)
	}
	if c := get(t, s, "user_c"); c.Email != "" || c.DisplayName != "Name msg_3" {
		t.Errorf("user_c = %+v, want its state without the email", c)
	}
	page, err := s.Users().List(ctx, models.UserFilter{Email: "TAKEN@example.com ", Limit: 10})
	if err != nil || len(page.Users) != 1 || page.Users[0].UserID != "user_b" {
		t.Errorf("List by email = %+v, %v; want user_b alone", page.Users, err)
	}
	// A deleted user's email is free.
	apply(t, s, deletion("user_b", "msg_4", 3*time.Second))
	apply(t, s, change("user_d", "msg_5", time.Second, "taken@example.com"))
	if d := get(t, s, "user_d"); d.Email != "taken@example.com" {
		t.Errorf("user_d = %q, want the email of a deleted user", d.Email)
	}
}

// testEmailLookAlike: an address written with a letter that Unicode
// folds to an ASCII one (the Kelvin sign K) is another address: a newer
// state holding it leaves the plain one to its owner, and the email
// filter, with any case of the ASCII letters, tells them apart.
func testEmailLookAlike(t *testing.T, s repository.Store) {
	ctx := context.Background()
	apply(t, s, change("user_kate", "msg_1", time.Second, "kate@example.com"))
	apply(t, s, change("user_kelvin", "msg_2", 2*time.Second, "\u212Aate@example.com"))
	if a, b := get(t, s, "user_kate"), get(t, s, "user_kelvin"); a.Email != "kate@example.com" || b.Email != "\u212Aate@example.com" {
		t.Errorf("after the look-alike: user_kate %q, user_kelvin %q; want each its own", a.Email, b.Email)
	}
	for filter, want := range map[string]string{"KATE@example.com": "user_kate", "\u212AATE@EXAMPLE.COM": "user_kelvin"} {
		page, err := s.Users().List(ctx, models.UserFilter{Email: filter, Limit: 10})
		if err != nil || len(page.Users) != 1 || page.Users[0].UserID != want {
			t.Errorf("List by email %q = %+v, %v; want %s alone", filter, page.Users, err, want)
		}
	}
}

// testEmailSwaps: users swap emails in Clerk while webhooks are down, and
// an intermediate event is lost; every order of arrival of the rest ends
// in Clerk's state, with every other field current.
func testEmailSwaps(t *testing.T, s repository.Store) {
	for _, tc := range []struct {
		name   string
		events []models.UserChange // delivered, in every order
		want   map[string]string
	}{{
		name: "swap, A's move to a temporary email lost",
		events: []models.UserChange{
			change("A", "msg_a1", 1*time.Second, "a@x.com"),
			change("B", "msg_b1", 1*time.Second, "b@x.com"),
			// lost: A → tmp@x.com at 2s
			change("B", "msg_b2", 3*time.Second, "a@x.com"),
			change("A", "msg_a3", 4*time.Second, "b@x.com"),
		},
		want: map[string]string{"A": "b@x.com", "B": "a@x.com"},
	}, {
		name: "rotation of three",
		events: []models.UserChange{
			change("A", "msg_a1", 1*time.Second, "a@x.com"),
			change("B", "msg_b1", 1*time.Second, "b@x.com"),
			change("C", "msg_c1", 1*time.Second, "c@x.com"),
			change("A", "msg_a2", 2*time.Second, "b@x.com"),
			change("B", "msg_b2", 3*time.Second, "c@x.com"),
			change("C", "msg_c2", 4*time.Second, "a@x.com"),
		},
		want: map[string]string{"A": "b@x.com", "B": "c@x.com", "C": "a@x.com"},
	}} {
		orders := permutations(tc.events)
		if len(orders) > 120 {
			orders = orders[:120:120]
		}
		for i, order := range orders {
			prefix := fmt.Sprintf("swap%d_%d_", len(tc.events), i)
			for _, ch := range order {
				ch.UserID, ch.Email = prefix+ch.UserID, prefix+ch.Email
				apply(t, s, ch)
			}
			for user, email := range tc.want {
				u := get(t, s, prefix+user)
				last := ""
				for _, ch := range tc.events {
					if ch.UserID == user {
						last = ch.EventID
					}
				}
				if u.Email != prefix+email || u.LastEventID != last {
					t.Errorf("%s, order %d: %s has %q from %s, want %q from %s", tc.name, i, user, u.Email, u.LastEventID, prefix+email, last)
				}
			}
		}
	}
}

func testUserList(t *testing.T, s repository.Store) {
	ctx := context.Background()
	for _, u := range []struct {
		id, email string
		deleted   bool
	}{
		{"user_list0", "l0@example.com", false},
		{"user_list1", "l1@example.com", false},
		{"user_list2", "l2@example.com", true},
		{"user_list3", "l3@example.com", false},
		{"user_list4", "l4@example.com", false},
		{"user_list5", "l5@example.com", true},
		{"user_list6", "l6@example.com", false},
	} {
		apply(t, s, change(u.id, "msg_"+u.id, time.Second, u.email))
		if u.deleted {
			apply(t, s, deletion(u.id, "msg_del_"+u.id, 2*time.Second))
		}
	}
	want := []string{"user_list0", "user_list1", "user_list3", "user_list4", "user_list6"}
	walk := func(f models.UserFilter) []string {
		var ids []string
		for range 20 {
			page, err := s.Users().List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Users) > f.Limit {
				t.Fatalf("page of %d users, limit %d", len(page.Users), f.Limit)
			}
			for _, u := range page.Users {
				ids = append(ids, u.UserID)
			}
			if page.NextCursor == "" {
				return ids
			}
			f.After = page.NextCursor
		}
		t.Fatal("the pages do not end")
		return nil
	}
	got := walk(models.UserFilter{Limit: 2})
	if !slices.Equal(sorted(got), want) || len(got) != len(want) {
		t.Errorf("active pages = %v, want each of %v once", got, want)
	}
	if all := walk(models.UserFilter{Limit: 3, IncludeDeleted: true}); len(all) != 7 {
		t.Errorf("pages with deleted users = %v, want 7 users", all)
	}
	if byEmail := walk(models.UserFilter{Email: "l2@example.com", Limit: 5}); len(byEmail) != 0 {
		t.Errorf("a deleted user's old email finds %v", byEmail)
	}
	if _, err := s.Users().List(ctx, models.UserFilter{Limit: 2, After: "\x00nonsense"}); err != nil && !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a foreign cursor: %v, want ErrInvalid or an empty page", err)
	}
}

func testChanges(t *testing.T, s repository.Store) {
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Millisecond)
	writes := []struct {
		user string
		at   time.Duration
	}{{"user_a", 0}, {"user_b", 0}, {"user_c", 0}, {"user_d", time.Millisecond}, {"user_e", 3 * time.Millisecond}}
	for i, w := range writes {
		ch := change(w.user, fmt.Sprintf("msg_%d", i), time.Duration(i)*time.Second, "")
		if _, err := s.Users().Apply(ctx, ch, base.Add(w.at)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Users().Apply(ctx, deletion("user_b", "msg_del", time.Hour), base.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	walk := func(since, until time.Time, limit int) (ids []string, cursor string) {
		t.Helper()
		for range 20 {
			page, err := s.Users().Changes(ctx, models.ChangeFilter{Since: since, Until: until, After: cursor, Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if page.NextCursor == "" {
				t.Fatal("no NextCursor")
			}
			for _, u := range page.Users {
				ids = append(ids, u.UserID)
			}
			cursor = page.NextCursor
			if len(page.Users) < limit {
				return ids, cursor
			}
		}
		t.Fatal("the walk does not end")
		return nil, ""
	}
	ids, cursor := walk(base.Add(-time.Microsecond), base.Add(2*time.Millisecond), 1)
	same := map[string]bool{"user_a": true, "user_c": true}
	if len(ids) != 4 || !same[ids[0]] || !same[ids[1]] || ids[2] != "user_d" || ids[3] != "user_b" {
		t.Errorf("walk = %v, want user_a and user_c (same time), user_d, user_b", ids)
	}
	more, _ := walk(base, base.Add(time.Hour), 10)
	if len(more) != 5 || more[4] != "user_e" {
		t.Errorf("full walk = %v", more)
	}
	page, err := s.Users().Changes(ctx, models.ChangeFilter{Since: base, Until: base.Add(time.Hour), After: cursor, Limit: 10})
	if err != nil || len(page.Users) != 1 || page.Users[0].UserID != "user_e" {
		t.Errorf("poll after the cursor = %+v, %v; want user_e alone", page.Users, err)
	}
	if ids, _ := walk(base.Add(time.Microsecond), base.Add(time.Hour), 10); len(ids) != 3 {
		t.Errorf("since +1µs = %v, want the 3 users changed at +1ms or later", ids)
	}
	if _, err := s.Users().Changes(ctx, models.ChangeFilter{Since: base, Until: base, After: "nonsense", Limit: 1}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}

func testWalkActive(t *testing.T, s repository.Store) {
	ctx := context.Background()
	written := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	state := func(id, eventID string, deleted bool) models.UserChange {
		return models.UserChange{UserID: id, EventID: eventID, SourceTime: written.Add(-time.Hour), Deleted: deleted,
			DisplayName: id, Metadata: json.RawMessage(`{}`)}
	}
	for _, u := range []struct {
		id      string
		at      time.Time // when it was first written
		deleted bool
	}{
		{"user_walk0", written, false},
		{"user_walk1", written, false},
		{"user_walk2", written, false},
		{"user_walk3", written, true},
		{"user_walk4", written, false},
		{"user_walk5", written.Add(time.Minute), false}, // after the cut
		{"user_walk6", written, false},
	} {
		if _, err := s.Users().Apply(ctx, state(u.id, "msg_"+u.id, false), u.at); err != nil {
			t.Fatal(err)
		}
		if u.deleted {
			if _, err := s.Users().Apply(ctx, state(u.id, "msg_z_"+u.id, true), u.at); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := []string{"user_walk0", "user_walk1", "user_walk2", "user_walk4", "user_walk6"}
	var got []string
	if err := s.Users().WalkActive(ctx, written.Add(time.Second), func(id string) error {
		got = append(got, id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sorted(got), want) {
		t.Errorf("WalkActive = %v, want %v (active, first written before the cut, each once)", got, want)
	}
	stop := errors.New("stop")
	if err := s.Users().WalkActive(ctx, written.Add(time.Second), func(string) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("WalkActive returns %v, want fn's error", err)
	}
}

// testDeprovisionedUsers: a user off-boarded by Directory Sync leaves the
// active list (and the email filter) but stays readable with deleted
// users; banned and locked users stay active, flagged; a later state may
// clear deprovisioned.
func testDeprovisionedUsers(t *testing.T, s repository.Store) {
	ctx := context.Background()
	flags := map[string]models.Profile{
		"user_dp_off":    {Deprovisioned: true},
		"user_dp_banned": {Banned: true},
		"user_dp_locked": {Locked: true},
		"user_dp_plain":  {},
	}
	for id, p := range flags {
		ch := change(id, "msg_"+id, time.Second, id+"@example.com")
		ch.Profile = p
		apply(t, s, ch)
	}
	list := func(f models.UserFilter) []string {
		f.Limit = 100
		page, err := s.Users().List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range page.Users {
			if strings.HasPrefix(u.UserID, "user_dp_") {
				out = append(out, u.UserID)
			}
		}
		return out
	}
	if got := list(models.UserFilter{}); !slices.Equal(got, []string{"user_dp_banned", "user_dp_locked", "user_dp_plain"}) {
		t.Errorf("active users = %v, want banned and locked kept, deprovisioned out", got)
	}
	if got := list(models.UserFilter{IncludeDeleted: true}); len(got) != 4 {
		t.Errorf("with deleted = %v, want all 4", got)
	}
	if got := list(models.UserFilter{Email: "user_dp_off@example.com"}); len(got) != 0 {
		t.Errorf("the email filter finds a deprovisioned user: %v", got)
	}
	if got := list(models.UserFilter{Email: "user_dp_off@example.com", IncludeDeleted: true}); len(got) != 1 {
		t.Errorf("the email filter with deleted = %v, want the deprovisioned user", got)
	}
	if u := get(t, s, "user_dp_off"); !u.Deprovisioned || u.Deleted() {
		t.Errorf("deprovisioned user = %+v", u)
	}
	apply(t, s, change("user_dp_off", "msg_back", 2*time.Second, "user_dp_off@example.com"))
	if got := list(models.UserFilter{}); !slices.Contains(got, "user_dp_off") {
		t.Errorf("a user provisioned again is not active: %v", got)
	}
}
