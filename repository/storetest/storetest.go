// Package storetest is the behaviour suite every usersync store passes:
// each promise a store keeps (docs/guarantees.md, docs/design.md), written once.
// A store's test calls Run with a function that opens a fresh, empty store:
//
//	func TestBehaviour(t *testing.T) { storetest.Run(t, openFresh) }
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Opener opens a fresh, empty store for one test and closes it when the
// test ends.
type Opener func(t testing.TB) repository.Store

// Run runs every test of the suite against the stores open opens.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, repository.Store)
	}{
		{"Users_OrderingAndTombstones", testOrderingAndTombstones},
		{"Users_EveryOrderOfDeliveryEndsTheSame", testEveryOrderEndsTheSame},
		{"Users_ConcurrentStatesOfAUserEndOnTheNewest", testConcurrentStates},
		{"Users_MetadataRoundTripsExactly", testMetadataRoundTrip},
		{"Users_EmailIsUniqueAmongActiveUsers", testEmailUnique},
		{"Users_EmailSwapsConvergeInAnyOrder", testEmailSwaps},
		{"Users_ALookAlikeEmailIsAnotherEmail", testEmailLookAlike},
		{"Users_ListPagesAndFilters", testUserList},
		{"Users_ChangesOrderCursorAndUpperBound", testChanges},
		{"Users_WalkActiveSeesEachActiveUserOnce", testWalkActive},
		{"Users_DeprovisionedLeaveTheActiveListBannedAndLockedStay", testDeprovisionedUsers},
		{"Organizations_OrderingAndTombstones", testOrgOrdering},
		{"Organizations_EveryOrderOfDeliveryEndsTheSame", testOrgEveryOrder},
		{"Organizations_ListPagesAndSlug", testOrgList},
		{"Organizations_AndMemberships_ChangeFeeds", testOrgAndMemberChanges},
		{"Memberships_EveryOrderOfDeliveryEndsTheSame", testMemberEveryOrder},
		{"Memberships_NestedOrganizationIsAppliedUnderTheOrderingRule", testNestedOrganization},
		{"Memberships_DeletedWithTheirOrganizationInEveryOrder", testOrgCascade},
		{"Memberships_DeletedWithTheirUserInEveryOrder", testUserCascade},
		{"Memberships_ARejoinIsANewMembership", testRejoin},
		{"Memberships_OneActivePerOrganizationAndUser", testOnePerPair},
		{"Memberships_MemberComesFromTheUsersCurrentRecord", testMemberFromUser},
		{"Memberships_ListPagesAndFilters", testMemberList},
		{"Organizations_AndMemberships_WalkActiveSeesEachActiveOneOnce", testOrgAndMemberWalk},
		{"Events_ARetryIsRecognised", testRetryRecognised},
		{"Events_ConcurrentDeliveriesStoreOneEvent", testConcurrentRecord},
		{"Events_KeepTheBodyExactly", testBodyExact},
		{"Events_GetUnknownIsNotFound", testGetUnknown},
		{"Events_TheFirstOutcomeStays", testFirstOutcome},
		{"Events_LogPagesNewestFirstWithEveryFilter", testEventLog},
		{"Events_LogFiltersByKindAndObject", testEventLogByKindAndObject},
		{"Events_StatsCountWithoutReadingProcessedEvents", testStats},
		{"Events_StatsCountStoredAndFailedEventsPerKind", testStatsPerKind},
		{"Events_StatsOfAnEmptyStoreNameEveryStatusAndOutcome", testEmptyStats},
		{"Events_DueFindsStuckAndRetryableEventsInClerkOrder", testDue},
		{"Events_AClaimHasOneWinner", testClaim},
		{"Events_RetentionDeletesOnlyOldProcessedEvents", testRetention},
		{"Events_OnlyAFailedEventIsDiscardedAndItIsFinished", testDiscard},
		{"Erasure_ErasesADeletedUsersEventsOnly", testErasure},
		{"Erasure_AnEventAfterTheUserIsErasedIsErasedAtOnce", testEraseLateEvent},
		{"Erasure_PendingEventsAreErasedOnceDone", testErasePending},
		{"Erasure_ADeletedMembershipsEventsGoWhileItsUserStays", testEraseDeletedMembership},
		{"Erasure_MembershipsDeletedByACascadeOrAPairTakenAreErased", testEraseMembershipsOfCascades},
		{"Leases_OneHolderAtATime", testLeases},
		{"Activity_MinuteBucketsAddUpToTheirHour", testActivityAddsUp},
		{"Activity_ConcurrentAddsToABucketAllCount", testActivityConcurrentAdds},
		{"Activity_BucketsPastTheirRetentionAreDeleted", testActivityRetention},
		{"Activity_RefusesKindsThatAreNotNamesAndOtherSizes", testActivityRefusesWhatIsNotAName},
		{"FailureGroups_CountFailedEventsByReasonWithABound", testFailureGroups},
		{"FailureGroups_OfNoFailureIsAnEmptyList", testFailureGroupsEmpty},
		{"ReconcileRuns_KeepTheLastOnesNewestFirst", testReconcileRuns},
		{"ReconcileRuns_EachKindsCountsRoundTripAndAKindNotReadIsNone", testReconcileRunKinds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.test(t, open(t))
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

func change(userID, eventID string, at time.Duration, email string) models.Change {
	return models.Change{
		UserID: userID, EventID: eventID, SourceTime: t0.Add(at),
		Email: email, DisplayName: "Name " + eventID, Metadata: json.RawMessage(`{"e":"` + eventID + `"}`),
	}
}

func deletion(userID, eventID string, at time.Duration) models.Change {
	return models.Change{UserID: userID, EventID: eventID, SourceTime: t0.Add(at), Deleted: true}
}

func apply(t *testing.T, s repository.Store, ch models.Change) models.Outcome {
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
		ch   models.Change
		want models.Outcome
	}{
		{change("user_1", "msg_b", 2*time.Second, "a@example.com"), models.OutcomeApplied},
		{change("user_1", "msg_b", 2*time.Second, "a@example.com"), models.OutcomeApplied}, // the same event again
		{change("user_1", "msg_a", 1*time.Second, "old@example.com"), models.OutcomeStale},
		{change("user_1", "msg_c", 2*time.Second, "c@example.com"), models.OutcomeApplied}, // tie: larger event id wins
		{change("user_1", "msg_a2", 2*time.Second, "x@example.com"), models.OutcomeStale},
		{deletion("user_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{deletion("user_1", "msg_d", 3*time.Second), models.OutcomeApplied},
		{deletion("user_1", "msg_d2", 4*time.Second), models.OutcomeDeletedUser},
		{change("user_1", "msg_e", 9*time.Second, "c@example.com"), models.OutcomeDeletedUser},
		{deletion("user_2", "msg_f", 1*time.Second), models.OutcomeApplied}, // never seen: a tombstone
		{change("user_2", "msg_g", 9*time.Second, "c@example.com"), models.OutcomeDeletedUser},
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
	for i, order := range permutations([]models.Change{created, updated, deleted}) {
		user := fmt.Sprintf("user_cud%d", i)
		for _, ch := range order {
			ch.UserID = user
			apply(t, s, ch)
		}
		if u := get(t, s, user); !u.Deleted() || u.LastEventID != "msg_3" || u.DisplayName != user {
			t.Errorf("order %d ended in %+v, want the tombstone", i, u)
		}
	}
	for i, order := range permutations([]models.Change{created, updated}) {
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

func permutations[T any](xs []T) [][]T {
	if len(xs) <= 1 {
		return [][]T{slices.Clone(xs)}
	}
	var out [][]T
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]T{xs[i]}, p...))
		}
	}
	return out
}

func testConcurrentStates(t *testing.T, s repository.Store) {
	ctx := context.Background()
	const users, versions = 20, 4
	for u := range users {
		apply(t, s, change(fmt.Sprintf("user_%d", u), "msg_0", 0, ""))
	}
	var wg stdsync.WaitGroup
	for u := range users {
		for v := 1; v <= versions; v++ {
			wg.Go(func() {
				ch := change(fmt.Sprintf("user_%d", u), fmt.Sprintf("msg_%d", v), time.Duration(v)*time.Second, "")
				if v == versions && u%3 == 0 {
					ch = deletion(ch.UserID, ch.EventID, time.Duration(v)*time.Second)
				}
				if _, err := s.Users().Apply(ctx, ch, time.Now()); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for u := range users {
		got := get(t, s, fmt.Sprintf("user_%d", u))
		want := fmt.Sprintf("msg_%d", versions)
		if got.LastEventID != want || (u%3 == 0) != got.Deleted() {
			t.Errorf("user_%d ended on %s (deleted %v), want %s (deleted %v)", u, got.LastEventID, got.Deleted(), want, u%3 == 0)
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
		events []models.Change // delivered, in every order
		want   map[string]string
	}{{
		name: "swap, A's move to a temporary email lost",
		events: []models.Change{
			change("A", "msg_a1", 1*time.Second, "a@x.com"),
			change("B", "msg_b1", 1*time.Second, "b@x.com"),
			// lost: A → tmp@x.com at 2s
			change("B", "msg_b2", 3*time.Second, "a@x.com"),
			change("A", "msg_a3", 4*time.Second, "b@x.com"),
		},
		want: map[string]string{"A": "b@x.com", "B": "a@x.com"},
	}, {
		name: "rotation of three",
		events: []models.Change{
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
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("user_list%d", i)
		apply(t, s, change(id, "msg_"+id, time.Second, fmt.Sprintf("l%d@example.com", i)))
		if i == 2 || i == 5 {
			apply(t, s, deletion(id, "msg_del_"+id, 2*time.Second))
			continue
		}
		want = append(want, id)
	}
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

func sorted(xs []string) []string { xs = slices.Clone(xs); slices.Sort(xs); return xs }

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
	state := func(id, eventID string, deleted bool) models.Change {
		return models.Change{UserID: id, EventID: eventID, SourceTime: written.Add(-time.Hour), Deleted: deleted,
			DisplayName: id, Metadata: json.RawMessage(`{}`)}
	}
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("user_walk%d", i)
		at := written
		if i == 5 {
			at = written.Add(time.Minute) // first written after the cut
		}
		if _, err := s.Users().Apply(ctx, state(id, "msg_"+id, false), at); err != nil {
			t.Fatal(err)
		}
		if i == 3 {
			if _, err := s.Users().Apply(ctx, state(id, "msg_z_"+id, true), at); err != nil {
				t.Fatal(err)
			}
		}
		if i != 3 && i != 5 {
			want = append(want, id)
		}
	}
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

func newEvent(id, userID, body string) models.Event {
	return models.Event{
		EventID: id, Type: "user.created", EventType: models.EventCreated, UserID: userID,
		RawBody: []byte(body), Source: models.SourceClerk, ReceivedAt: t0, Status: models.StatusStored,
	}
}

func record(t *testing.T, s repository.Store, ev models.Event) models.Event {
	t.Helper()
	got, created, err := s.Events().Record(context.Background(), ev)
	if err != nil || !created {
		t.Fatalf("Record(%s) = %v, %v; want a new event", ev.EventID, created, err)
	}
	return got
}

func getEvent(t *testing.T, s repository.Store, id string) models.Event {
	t.Helper()
	ev, err := s.Events().Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get event %s: %v", id, err)
	}
	return ev
}

func testRetryRecognised(t *testing.T, s repository.Store) {
	ctx := context.Background()
	first := record(t, s, newEvent("msg_1", "user_1", `{"type":"user.created"}`))
	if first.Status != models.StatusStored || first.ID == "" {
		t.Fatalf("Record = %+v, want a stored event with an id", first)
	}
	if err := s.Events().MarkProcessed(ctx, first.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	again, created, err := s.Events().Record(ctx, newEvent("msg_1", "user_1", `{"type":"user.created"}`))
	if err != nil || created || again.ID != first.ID || again.Status != models.StatusProcessed || again.Outcome != models.OutcomeApplied {
		t.Fatalf("Record again = %+v, %v, %v; want the processed event", again, created, err)
	}
	// A failure reported late, by a concurrent delivery, does not undo it.
	if err := s.Events().MarkFailed(ctx, first.ID, "late failure", nil); err != nil {
		t.Fatal(err)
	}
	got := getEvent(t, s, first.ID)
	if got.Status != models.StatusProcessed || got.Error != "" || got.Attempts != 1 {
		t.Errorf("event = %+v; want processed after 1 attempt", got)
	}
	if byEventID := getEvent(t, s, "msg_1"); byEventID.ID != first.ID {
		t.Errorf("Get by eventId = %s, want %s", byEventID.ID, first.ID)
	}
}

func testConcurrentRecord(t *testing.T, s repository.Store) {
	var created atomic.Int32
	ids := make(chan string, 30)
	var wg stdsync.WaitGroup
	for range 30 {
		wg.Go(func() {
			ev, c, err := s.Events().Record(context.Background(), newEvent("msg_same", "user_1", `{}`))
			if err != nil {
				t.Error(err)
				return
			}
			if c {
				created.Add(1)
			}
			ids <- ev.ID
		})
	}
	wg.Wait()
	close(ids)
	first := <-ids
	for id := range ids {
		if id != first {
			t.Errorf("deliveries of one event got ids %s and %s", first, id)
		}
	}
	if created.Load() != 1 {
		t.Errorf("%d deliveries created the event, want 1", created.Load())
	}
}

func testBodyExact(t *testing.T, s repository.Store) {
	for _, body := range []string{
		"{\"type\":\"user.created\",\"x\":\"\xff\xfe\"}", // not UTF-8
		`{"type":"user.created","data":` + deep(300) + `}`,
		`{"type":"user.created","data":{"public_metadata":{"a.b":{"$c":1}}}}`,
	} {
		ev := record(t, s, newEvent(fmt.Sprintf("msg_body%d", len(body)), "user_1", body))
		if got := getEvent(t, s, ev.ID); string(got.RawBody) != body {
			t.Errorf("raw body = %q, want %q", got.RawBody, body)
		}
	}
}

func deep(n int) string {
	b := make([]byte, 0, 6*n+1)
	for range n {
		b = append(b, `{"a":`...)
	}
	b = append(b, '1')
	for range n {
		b = append(b, '}')
	}
	return string(b)
}

func testGetUnknown(t *testing.T, s repository.Store) {
	for _, id := range []string{"nope", "123456", "000000000000000000000000"} {
		if _, err := s.Events().Get(context.Background(), id); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
	if err := s.Events().MarkProcessed(context.Background(), "nope", models.OutcomeApplied, t0); err != nil && !errors.Is(err, models.ErrNotFound) {
		t.Errorf("MarkProcessed of an unknown id: %v", err)
	}
}

func testFirstOutcome(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ev := record(t, s, newEvent("msg_first", "user_1", `{}`))
	for _, o := range []models.Outcome{models.OutcomeApplied, models.OutcomeStale, models.OutcomeDeletedUser} {
		if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0); err != nil {
			t.Fatal(err)
		}
	}
	got := getEvent(t, s, ev.ID)
	if got.Outcome != models.OutcomeApplied || got.Attempts != 1 || !got.ProcessedAt.Equal(t0) {
		t.Errorf("event = %+v; want its first outcome, applied, after 1 attempt", got)
	}
	st, err := s.Events().Stats(ctx)
	if err != nil || st.ByOutcome[models.OutcomeApplied] != 1 || st.ByOutcome[models.OutcomeStale] != 0 {
		t.Errorf("stats = %+v, %v; want the event counted once, as applied", st, err)
	}
}

func testEventLog(t *testing.T, s repository.Store) {
	ctx := context.Background()
	types := []models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted}
	var all []models.Event
	for i := range 12 {
		user := fmt.Sprintf("user_%d", i%3)
		ev := kindEvent(fmt.Sprintf("msg_log%02d", i), models.KindUser, types[i%3], user, user, time.Duration(i/2)*time.Second) // pairs share a time
		ev.RawBody = []byte(`{}`)
		ev = record(t, s, ev)
		if i%4 == 0 {
			if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, t0); err != nil {
				t.Fatal(err)
			}
			ev.Status = models.StatusProcessed
		}
		all = append(all, ev)
	}
	for _, f := range []models.EventFilter{
		{},
		{Status: models.StatusProcessed},
		{EventType: models.EventUpdated},
		{UserID: "user_1"},
		{Status: models.StatusStored, EventType: models.EventCreated},
		{Status: models.StatusStored, UserID: "user_2"},
		{Since: t0.Add(2 * time.Second), Until: t0.Add(5 * time.Second)},
	} {
		if got, want := logIDs(t, s, f), selected(all, f); !inLogOrder(all, got, want) {
			t.Errorf("log %+v = %v, want %v (newest first)", f, got, want)
		}
	}
	if _, err := s.Events().List(ctx, models.EventFilter{Limit: 2, After: "nonsense"}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("bad cursor: %v, want ErrInvalid", err)
	}
}

// selected returns the event ids of all (oldest first) that f selects,
// newest first: what the log should list.
func selected(all []models.Event, f models.EventFilter) []string {
	var want []string
	for i := len(all) - 1; i >= 0; i-- {
		ev := all[i]
		if (f.Status == "" || ev.Status == f.Status) && (f.EventType == "" || ev.EventType == f.EventType) &&
			(f.Kind == "" || ev.Kind() == f.Kind) && (f.ObjectID == "" || ev.ObjectID == f.ObjectID) &&
			(f.UserID == "" || ev.UserID == f.UserID) && (f.Since.IsZero() || !ev.ReceivedAt.Before(f.Since)) &&
			(f.Until.IsZero() || ev.ReceivedAt.Before(f.Until)) {
			want = append(want, ev.EventID)
		}
	}
	return want
}

// inLogOrder reports whether got lists the events of want, each once, in
// the log's order: newest receivedAt first. Events received at the same
// time may come in any order the store keeps (SQLite breaks the tie by
// row, MongoDB by _id, a hash of the event id), so each run of one time
// is compared as a set.
func inLogOrder(all []models.Event, got, want []string) bool {
	at := make(map[string]time.Time, len(all))
	for _, ev := range all {
		at[ev.EventID] = ev.ReceivedAt
	}
	norm := func(ids []string) []string {
		out := slices.Clone(ids)
		for i := 0; i < len(out); {
			j := i + 1
			for j < len(out) && at[out[j]].Equal(at[out[i]]) {
				j++
			}
			slices.Sort(out[i:j])
			i = j
		}
		return out
	}
	return slices.Equal(norm(got), norm(want))
}

// logIDs reads the whole log of f in pages of 2 and returns its event
// ids, checking that every page but the last is full and that no page
// carries a body.
func logIDs(t *testing.T, s repository.Store, f models.EventFilter) []string {
	t.Helper()
	var got []string
	f.Limit = 2
	for range 50 {
		page, err := s.Events().List(context.Background(), f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		if len(page.Events) < f.Limit && page.NextCursor != "" {
			t.Errorf("List(%+v): a page of %d with a next cursor", f, len(page.Events))
		}
		for _, ev := range page.Events {
			if len(ev.RawBody) != 0 {
				t.Errorf("the log carries a body: %q", ev.RawBody)
			}
			got = append(got, ev.EventID)
		}
		if page.NextCursor == "" {
			break
		}
		f.After = page.NextCursor
	}
	return got
}

func testStats(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := now.Add(-48 * time.Hour)
	seeder, ok := s.(repository.Seeder)
	if !ok {
		t.Skip("the store seeds nothing")
	}
	var seeded []models.Event
	for i := range 4 {
		outcome := models.OutcomeApplied
		if i == 3 {
			outcome = models.OutcomeStale
		}
		ev := newEvent(fmt.Sprintf("msg_seed_%d", i), "user_1", `{}`)
		ev.Status, ev.Outcome, ev.ProcessedAt, ev.Attempts = models.StatusProcessed, outcome, &old, 1
		seeded = append(seeded, ev)
	}
	if err := seeder.SeedEvents(ctx, seeded); err != nil {
		t.Fatal(err)
	}
	for i, outcome := range []models.Outcome{models.OutcomeApplied, models.OutcomeDeletedUser} {
		ev := record(t, s, newEvent(fmt.Sprintf("msg_live_%d", i), "user_1", `{}`))
		for range 2 { // the second mark is a concurrent delivery's: not counted
			if err := s.Events().MarkProcessed(ctx, ev.ID, outcome, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	record(t, s, newEvent("msg_stored", "user_1", `{}`))
	retry := now.Add(time.Hour)
	for i, at := range []*time.Time{&retry, nil} {
		ev := record(t, s, newEvent(fmt.Sprintf("msg_failed_%d", i), "user_1", `{}`))
		if err := s.Events().MarkFailed(ctx, ev.ID, "boom", at); err != nil {
			t.Fatal(err)
		}
	}
	want := func(step string, processed, applied, stale, deleted int64) {
		t.Helper()
		st, err := s.Events().Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.ByStatus[models.StatusProcessed] != processed || st.ByOutcome[models.OutcomeApplied] != applied ||
			st.ByOutcome[models.OutcomeStale] != stale || st.ByOutcome[models.OutcomeDeletedUser] != deleted ||
			st.ByStatus[models.StatusStored] != 1 || st.ByStatus[models.StatusFailed] != 2 || st.GaveUp != 1 {
			t.Errorf("%s: stats = %+v; want %d processed (%d applied, %d stale, %d deleted_user), 1 stored, 2 failed, 1 given up",
				step, st, processed, applied, stale, deleted)
		}
	}
	want("seeded and processed", 6, 4, 1, 1)
	for {
		n, err := s.Events().DeleteProcessedBefore(ctx, now.Add(-24*time.Hour), 3)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	want("after retention", 2, 1, 0, 1)
}

func testEmptyStats(t *testing.T, s repository.Store) {
	st, err := s.Events().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, status := range []models.EventStatus{models.StatusStored, models.StatusProcessed, models.StatusFailed} {
		if n, ok := st.ByStatus[status]; !ok || n != 0 {
			t.Errorf("stats of an empty store: %s = %d (present %v), want 0", status, n, ok)
		}
	}
	for _, o := range models.Outcomes {
		if n, ok := st.ByOutcome[o]; !ok || n != 0 {
			t.Errorf("stats of an empty store: %s = %d (present %v), want 0", o, n, ok)
		}
	}
}

func testDue(t *testing.T, s repository.Store) {
	ctx := context.Background()
	now := t0.Add(time.Hour)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	mk := func(id string, received time.Duration, source *time.Time) models.Event {
		ev := newEvent(id, "user_1", `{"b":"`+id+`"}`)
		ev.ReceivedAt, ev.SourceTimestamp = t0.Add(received), source
		return record(t, s, ev)
	}
	stuck := mk("msg_stuck", 0, at(5*time.Second))
	mk("msg_fresh", 59*time.Minute+50*time.Second, at(time.Second)) // still the delivery's
	retryNow := mk("msg_retry_now", time.Minute, at(3*time.Second))
	retryLater := mk("msg_retry_later", time.Minute, at(time.Second))
	gaveUp := mk("msg_gave_up", time.Minute, at(time.Second))
	done := mk("msg_done", 0, at(time.Second))
	for _, f := range []struct {
		ev    models.Event
		retry *time.Time
	}{{retryNow, at(30 * time.Minute)}, {retryLater, at(2 * time.Hour)}, {gaveUp, nil}} {
		if err := s.Events().MarkFailed(ctx, f.ev.ID, "boom", f.retry); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Events().MarkProcessed(ctx, done.ID, models.OutcomeApplied, now); err != nil {
		t.Fatal(err)
	}
	due, err := s.Events().Due(ctx, now.Add(-time.Minute), now, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range due {
		got = append(got, ev.EventID)
		if string(ev.RawBody) != `{"b":"`+ev.EventID+`"}` {
			t.Errorf("due event %s without its body: %q", ev.EventID, ev.RawBody)
		}
	}
	if want := []string{retryNow.EventID, stuck.EventID}; !slices.Equal(got, want) {
		t.Errorf("Due = %v, want %v (in Clerk's order)", got, want)
	}
	if due, err := s.Events().Due(ctx, now.Add(-time.Minute), now, 1); err != nil || len(due) != 1 {
		t.Errorf("Due with limit 1 = %d events, %v", len(due), err)
	}
}

func testClaim(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ev := record(t, s, newEvent("msg_claim", "user_1", `{}`))
	var wins atomic.Int32
	var wg stdsync.WaitGroup
	for range 10 {
		wg.Go(func() {
			ok, err := s.Events().Claim(ctx, ev.ID, 0, t0, time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d sweeps won the claim, want 1", wins.Load())
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 0, t0.Add(2*time.Minute), time.Minute); !ok {
		t.Error("an expired claim cannot be taken over")
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 1, t0.Add(10*time.Minute), time.Minute); ok {
		t.Error("a claim with a stale attempt count won")
	}
	if err := s.Events().MarkFailed(ctx, ev.ID, "boom", nil); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 1, t0.Add(3*time.Minute), time.Minute); !ok {
		t.Error("a mark does not end the claim")
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.Events().Claim(ctx, ev.ID, 2, t0.Add(time.Hour), time.Minute); ok {
		t.Error("a processed event was claimed")
	}
}

func testRetention(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ids := map[string]string{}
	for _, id := range []string{"old", "new", "stored", "failed"} {
		ids[id] = record(t, s, newEvent("msg_"+id, "user_1", `{}`)).ID
	}
	if err := s.Events().MarkProcessed(ctx, ids["old"], models.OutcomeApplied, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkProcessed(ctx, ids["new"], models.OutcomeApplied, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().MarkFailed(ctx, ids["failed"], "boom", nil); err != nil {
		t.Fatal(err)
	}
	n, err := s.Events().DeleteProcessedBefore(ctx, t0.Add(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("DeleteProcessedBefore = %d, %v; want 1", n, err)
	}
	for id, gone := range map[string]bool{"old": true, "new": false, "stored": false, "failed": false} {
		_, err := s.Events().Get(ctx, ids[id])
		if gone != errors.Is(err, models.ErrNotFound) {
			t.Errorf("event %s: Get error %v, want gone=%v", id, err, gone)
		}
	}
}

// eraseSetup makes user_er deleted with two processed events.
func eraseSetup(t *testing.T, s repository.Store, user string) []string {
	ctx := context.Background()
	var ids []string
	for i, ch := range []models.Change{change(user, "msg_er1"+user, time.Second, user+"@example.com"), deletion(user, "msg_er2"+user, 2*time.Second)} {
		ev := record(t, s, newEvent(ch.EventID, user, `{"email":"`+user+`@example.com"}`))
		o := apply(t, s, ch)
		if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	return ids
}

func testErasure(t *testing.T, s repository.Store) {
	ctx := context.Background()
	ids := eraseSetup(t, s, "user_er")
	apply(t, s, change("user_active", "msg_act", time.Second, ""))
	if _, err := s.EraseUser(ctx, "user_active", t0); !errors.Is(err, models.ErrConflict) {
		t.Errorf("EraseUser of an active user: %v, want ErrConflict", err)
	}
	if _, err := s.EraseUser(ctx, "user_unknown", t0); !errors.Is(err, models.ErrNotFound) {
		t.Errorf("EraseUser of an unknown user: %v, want ErrNotFound", err)
	}
	// Not due yet: deleted after the cutoff.
	if res, err := s.EraseDeletedBefore(ctx, t0, t0); err != nil || res.Events != 0 {
		t.Errorf("erasure before the cutoff = %+v, %v; want nothing erased", res, err)
	}
	res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour))
	if err != nil || res.Users != 1 || res.Events != 2 || res.Pending != 0 {
		t.Errorf("erasure = %+v, %v; want 1 user, 2 events", res, err)
	}
	for _, id := range ids {
		if ev := getEvent(t, s, id); len(ev.RawBody) != 0 || ev.ErasedAt == nil {
			t.Errorf("event %s after erasure: body %q, erasedAt %v", id, ev.RawBody, ev.ErasedAt)
		}
	}
	if res, err := s.EraseDeletedBefore(ctx, t0.Add(time.Hour), t0.Add(time.Hour)); err != nil || res != (models.Erasure{}) {
		t.Errorf("a second pass = %+v, %v; want nothing to do", res, err)
	}
}

func testEraseLateEvent(t *testing.T, s repository.Store) {
	ctx := context.Background()
	eraseSetup(t, s, "user_late")
	if res, err := s.EraseUser(ctx, "user_late", t0); err != nil || res.Users != 1 {
		t.Fatalf("EraseUser = %+v, %v", res, err)
	}
	late := change("user_late", "msg_late", time.Hour, "user_late@example.com")
	ev := record(t, s, newEvent(late.EventID, "user_late", `{"email":"user_late@example.com"}`))
	o := apply(t, s, late)
	if o != models.OutcomeDeletedUser {
		t.Fatalf("late event outcome %q, want deleted_user", o)
	}
	if err := s.Events().MarkProcessed(ctx, ev.ID, o, t0); err != nil {
		t.Fatal(err)
	}
	if got := getEvent(t, s, ev.ID); len(got.RawBody) != 0 || got.ErasedAt == nil {
		t.Errorf("an event of an erased user kept its body: %q", got.RawBody)
	}
}

func testErasePending(t *testing.T, s repository.Store) {
	ctx := context.Background()
	eraseSetup(t, s, "user_pend")
	retry := t0.Add(time.Hour)
	pending := record(t, s, newEvent("msg_pending", "user_pend", `{"email":"p@example.com"}`))
	if err := s.Events().MarkFailed(ctx, pending.ID, "boom", &retry); err != nil {
		t.Fatal(err)
	}
	res, err := s.EraseUser(ctx, "user_pend", t0)
	if err != nil || res.Pending != 1 || res.Events != 2 || res.Users != 0 {
		t.Fatalf("EraseUser with a pending event = %+v, %v", res, err)
	}
	if err := s.Events().MarkProcessed(ctx, pending.ID, models.OutcomeDeletedUser, t0); err != nil {
		t.Fatal(err)
	}
	res, err = s.EraseDeletedBefore(ctx, t0, t0)
	if err != nil || res.Events != 1 || res.Users != 1 {
		t.Errorf("the next pass = %+v, %v; want the pending event erased", res, err)
	}
	if got := getEvent(t, s, pending.ID); len(got.RawBody) != 0 {
		t.Errorf("pending event kept its body: %q", got.RawBody)
	}
}

func testLeases(t *testing.T, s repository.Store) {
	ctx := context.Background()
	l := s.Leases()
	if ok, err := l.Acquire(ctx, "reconcile", "a", t0, t0.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("first Acquire = %v, %v", ok, err)
	}
	if ok, _ := l.Acquire(ctx, "reconcile", "b", t0.Add(30*time.Second), t0.Add(2*time.Minute)); ok {
		t.Error("a held lease was taken")
	}
	if ok, _ := l.Extend(ctx, "reconcile", "b", t0.Add(time.Hour)); ok {
		t.Error("a lease was extended by another owner")
	}
	if ok, _ := l.Extend(ctx, "reconcile", "a", t0.Add(2*time.Minute)); !ok {
		t.Error("the owner cannot extend its lease")
	}
	if ok, _ := l.Acquire(ctx, "reconcile", "b", t0.Add(time.Minute+30*time.Second), t0.Add(time.Hour)); ok {
		t.Error("an extended lease was taken before its new expiry")
	}
	if ok, _ := l.Acquire(ctx, "reconcile", "b", t0.Add(3*time.Minute), t0.Add(time.Hour)); !ok {
		t.Error("an expired lease cannot be taken")
	}
	if ok, _ := l.Acquire(ctx, "other", "a", t0, t0.Add(time.Minute)); !ok {
		t.Error("leases of other names are not independent")
	}
	// A lease set further ahead than any schedule would is stale.
	if ok, _ := l.Reclaim(ctx, "reconcile", "c", t0.Add(2*time.Hour), t0.Add(4*time.Minute)); ok {
		t.Error("a lease within the horizon was reclaimed")
	}
	if ok, _ := l.Reclaim(ctx, "reconcile", "c", t0.Add(30*time.Minute), t0.Add(4*time.Minute)); !ok {
		t.Error("a lease beyond the horizon was not reclaimed")
	}
	if ok, _ := l.Extend(ctx, "reconcile", "c", t0.Add(5*time.Minute)); !ok {
		t.Error("the owner that reclaimed a lease does not hold it")
	}
}
