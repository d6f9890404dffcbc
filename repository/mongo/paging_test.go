package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// pagingEvents seeds n events received at uneven times (bursts within one
// millisecond, minutes apart, and days apart), of every status and type,
// and returns them newest first (receivedAt, then _id), as the log lists
// them.
func pagingEvents(t *testing.T, s *mongo.Store, n int, base time.Time) []models.Event {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	statuses := []models.EventStatus{models.StatusProcessed, models.StatusProcessed, models.StatusProcessed, models.StatusStored, models.StatusFailed}
	types := []models.EventType{models.EventUpdated, models.EventUpdated, models.EventCreated, models.EventDeleted}
	at := base
	var evs []models.Event
	for i := range n {
		switch r.IntN(10) {
		case 0:
			at = at.Add(-time.Duration(1+r.IntN(20)) * 24 * time.Hour)
		case 1, 2, 3:
			// same millisecond
		default:
			at = at.Add(-time.Duration(1+r.IntN(600)) * time.Second)
		}
		ev := newEvent(fmt.Sprintf("msg_page_%03d", i), `{}`)
		ev.ReceivedAt, ev.Status, ev.EventType = at, statuses[r.IntN(len(statuses))], types[r.IntN(len(types))]
		ev.Type = "user." + string(ev.EventType) // the type the filters select by
		ev.UserID = fmt.Sprintf("user_%d", r.IntN(5))
		if ev.Status == models.StatusProcessed {
			ev.Outcome, ev.ProcessedAt = models.OutcomeApplied, &at
		}
		evs = append(evs, ev)
	}
	if err := s.SeedEvents(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	var stored []models.Event
	for _, ev := range evs {
		got, err := s.Events().Get(context.Background(), ev.EventID)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, got)
	}
	sort.Slice(stored, func(i, j int) bool {
		if !stored[i].ReceivedAt.Equal(stored[j].ReceivedAt) {
			return stored[i].ReceivedAt.After(stored[j].ReceivedAt)
		}
		return stored[i].ID > stored[j].ID
	})
	return stored
}

// TestEventsList_WindowedPagesListEveryEventOnceInOrder pages through the
// log of unevenly received events with several filters and page sizes,
// twice (the second walk sizes its windows from the first), and compares
// with the log filtered and sorted in Go.
func TestEventsList_WindowedPagesListEveryEventOnceInOrder(t *testing.T) {
	ctx := context.Background()
	var finds atomic.Int64
	s := mongotest.OpenWith(t, mongo.Options{Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "find" {
				finds.Add(1)
			}
		},
	}})
	base := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	all := pagingEvents(t, s, 150, base)
	filters := []models.EventFilter{
		{}, {Status: models.StatusProcessed}, {EventType: models.EventDeleted}, {EventType: models.EventUpdated},
		{Status: models.StatusProcessed, EventType: models.EventCreated}, {UserID: "user_1"}, {Status: models.StatusFailed},
		{Since: all[100].ReceivedAt}, {Until: all[60].ReceivedAt}, {Status: models.StatusProcessed, Since: all[120].ReceivedAt, Until: all[20].ReceivedAt},
	}
	for _, f := range filters {
		var want []string
		for _, ev := range all {
			if (f.Status == "" || ev.Status == f.Status) && (f.EventType == "" || ev.EventType == f.EventType) &&
				(f.UserID == "" || ev.UserID == f.UserID) && (f.Since.IsZero() || !ev.ReceivedAt.Before(f.Since)) &&
				(f.Until.IsZero() || ev.ReceivedAt.Before(f.Until)) {
				want = append(want, ev.EventID)
			}
		}
		for _, limit := range []int{7, 50} {
			for walk := range 2 {
				f := f
				f.Limit, f.After = limit, ""
				var got []string
				pages := 0
				finds.Store(0)
				for {
					page, err := s.Events().List(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					pages++
					for _, ev := range page.Events {
						got = append(got, ev.EventID)
					}
					if page.NextCursor == "" {
						break
					}
					if len(page.Events) != limit || pages > 400 {
						t.Fatalf("%+v: page %d of %d events with a next cursor", f, pages, len(page.Events))
					}
					f.After = page.NextCursor
				}
				if !slices.Equal(got, want) {
					t.Errorf("%+v (walk %d): listed %d events %v\nwant %d %v", f, walk, len(got), got, len(want), want)
				}
				t.Logf("%+v limit %d walk %d: %d pages, %d finds", f, limit, walk, pages, finds.Load())
			}
		}
	}
}

// TestUsersList_WindowedPagesListEveryUserOnce pages through users, active
// only and all, and compares with the users sorted by id.
func TestUsersList_WindowedPagesListEveryUserOnce(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	var changes []models.UserChange
	for i := range 150 {
		changes = append(changes, models.UserChange{UserID: fmt.Sprintf("user_page_%03d", i), EventID: "m", SourceTime: t0,
			DisplayName: "x", Metadata: json.RawMessage(`{}`)})
	}
	if err := s.SeedUsers(ctx, changes, time.Now()); err != nil {
		t.Fatal(err)
	}
	deleted := map[string]bool{}
	for i := 0; i < 150; i += 7 {
		id := fmt.Sprintf("user_page_%03d", i)
		if _, err := s.Users().Apply(ctx, deletion(id, "z", time.Hour), time.Now()); err != nil {
			t.Fatal(err)
		}
		deleted[id] = true
	}
	for _, includeDeleted := range []bool{false, true} {
		var want []string
		for _, ch := range changes {
			if includeDeleted || !deleted[ch.UserID] {
				want = append(want, ch.UserID)
			}
		}
		sort.Slice(want, func(i, j int) bool {
			return mongo.DocIDForTest(want[i]).Hex() < mongo.DocIDForTest(want[j]).Hex()
		})
		for _, limit := range []int{9, 200} {
			for walk := range 2 {
				f := models.UserFilter{IncludeDeleted: includeDeleted, Limit: limit}
				var got []string
				for pages := 0; ; pages++ {
					page, err := s.Users().List(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, u := range page.Users {
						got = append(got, u.UserID)
					}
					if page.NextCursor == "" || pages > 300 {
						break
					}
					f.After = page.NextCursor
				}
				if !slices.Equal(got, want) {
					t.Errorf("includeDeleted=%v limit %d walk %d: listed %d users, want %d in id order", includeDeleted, limit, walk, len(got), len(want))
				}
			}
		}
	}
}

// TestEventsDue_WindowedSearchesFindEveryDueEventOldestFirst runs the
// sweep's search batch after batch, marking what it returns, over stored
// and failed events spread over months: every due event comes once, the
// stored ones oldest first, and nothing else comes.
func TestEventsDue_WindowedSearchesFindEveryDueEventOldestFirst(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	stuckBefore := now.Add(-time.Minute)
	r := rand.New(rand.NewPCG(3, 4))
	var evs []models.Event
	due := map[string]bool{}
	for i := range 120 {
		ev := newEvent(fmt.Sprintf("msg_due_%03d", i), `{}`)
		ev.ReceivedAt = now.Add(-time.Duration(r.Int64N(int64(90 * 24 * time.Hour))))
		if i%10 == 0 {
			ev.ReceivedAt = now.Add(-time.Duration(r.IntN(50)) * time.Second) // not stuck yet
		}
		if i%3 == 0 {
			ev.Status = models.StatusFailed
			retry := ev.ReceivedAt.Add(time.Duration(r.Int64N(int64(10 * 24 * time.Hour))))
			ev.RetryAt = &retry
			due[ev.EventID] = !retry.After(now)
		} else {
			due[ev.EventID] = ev.ReceivedAt.Before(stuckBefore)
		}
		evs = append(evs, ev)
	}
	if err := s.SeedEvents(ctx, evs); err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // the second round sizes its windows from the first
		seen := map[string]bool{}
		var lastStored time.Time
		for batch := 0; batch < 100; batch++ {
			got, err := s.Events().Due(ctx, stuckBefore, now, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			var firstStored time.Time
			for _, ev := range got {
				if seen[ev.EventID] || !due[ev.EventID] {
					t.Fatalf("round %d: Due returned %s again or not due", round, ev.EventID)
				}
				seen[ev.EventID] = true
				if ev.Status == models.StatusStored && (firstStored.IsZero() || ev.ReceivedAt.Before(firstStored)) {
					firstStored = ev.ReceivedAt
				}
				if err := s.Events().MarkProcessed(ctx, ev.ID, models.OutcomeApplied, now); err != nil {
					t.Fatal(err)
				}
			}
			if !firstStored.IsZero() && firstStored.Before(lastStored) {
				t.Errorf("round %d: a stored event received at %v came after one received at %v", round, firstStored, lastStored)
			}
			for _, ev := range got {
				if ev.Status == models.StatusStored && ev.ReceivedAt.After(lastStored) {
					lastStored = ev.ReceivedAt
				}
			}
		}
		for id, d := range due {
			if d && !seen[id] {
				t.Errorf("round %d: due event %s never returned", round, id)
			}
		}
		if round == 0 { // seed the same mix again, under new ids
			again := map[string]bool{}
			for i := range evs {
				again[evs[i].EventID+"_again"] = due[evs[i].EventID]
				evs[i].EventID += "_again"
			}
			due = again
			if err := s.SeedEvents(ctx, evs); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUsersChanges_WindowedPagesServeEveryChangeOnceInOrder writes users
// at uneven times (the same millisecond, minutes and days apart) and
// follows the change feed from long before, a few users a page.
func TestUsersChanges_WindowedPagesServeEveryChangeOnceInOrder(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	r := rand.New(rand.NewPCG(5, 6))
	at := time.Now().UTC().Truncate(time.Millisecond).Add(-60 * 24 * time.Hour)
	type written struct {
		id string
		at time.Time
	}
	var all []written
	for i := range 80 {
		switch r.IntN(4) {
		case 0:
			at = at.Add(time.Duration(1+r.IntN(5)) * 24 * time.Hour)
		case 1:
		default:
			at = at.Add(time.Duration(1+r.IntN(300)) * time.Second)
		}
		id := fmt.Sprintf("user_feed_%02d", i)
		if _, err := s.Users().Apply(ctx, change(id, "m", 0, ""), at); err != nil {
			t.Fatal(err)
		}
		all = append(all, written{id, at})
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].at.Equal(all[j].at) {
			return all[i].at.Before(all[j].at)
		}
		return mongo.DocIDForTest(all[i].id).Hex() < mongo.DocIDForTest(all[j].id).Hex()
	})
	var want []string
	for _, w := range all {
		want = append(want, w.id)
	}
	for walk := range 2 {
		f := models.ChangeFilter{Since: all[0].at.Add(-365 * 24 * time.Hour), Until: at, Limit: 6}
		var got []string
		for pages := 0; pages < 100; pages++ {
			page, err := s.Users().Changes(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range page.Users {
				got = append(got, u.UserID)
			}
			f.After = page.NextCursor
			if len(page.Users) < f.Limit {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("walk %d: feed served %v\nwant %v", walk, got, want)
		}
	}
}

// findLog records the filter of every find a store sends, by collection.
type findLog struct {
	mu      sync.Mutex
	filters map[string][]bson.Raw
}

func (l *findLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName != "find" {
			return
		}
		coll, _ := e.Command.Lookup("find").StringValueOK()
		filter, _ := e.Command.Lookup("filter").DocumentOK()
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.filters == nil {
			l.filters = map[string][]bson.Raw{}
		}
		l.filters[coll] = append(l.filters[coll], slices.Clone(filter))
	}}
}

func (l *findLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.filters = nil
}

// windows returns how many finds of coll bounded field above with $lt:
// the upper side of a window of a walk (no page's own filter has one).
func (l *findLog) windows(coll, field string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, f := range l.filters[coll] {
		if _, err := f.LookupErr(field, "$lt"); err == nil {
			n++
		}
	}
	return n
}

// orgAt is a state of organization id, written by Apply at now.
func orgAt(t *testing.T, s *mongo.Store, id string, deleted bool, now time.Time) {
	t.Helper()
	ch := models.OrganizationChange{OrgID: id, EventID: "msg_" + id, SourceTime: t0, Metadata: json.RawMessage(`{}`),
		OrganizationProfile: models.OrganizationProfile{Name: id, Slug: id}}
	if deleted {
		ch = models.OrganizationChange{OrgID: id, EventID: "msg_del_" + id, SourceTime: t0.Add(time.Hour), Deleted: true}
	}
	if _, err := s.Organizations().Apply(context.Background(), ch, now); err != nil {
		t.Fatal(err)
	}
}

// TestOrganizationsList_WindowedPagesListEveryOrganizationOnce pages
// through organizations, active only and all, twice (the second walk
// sizes its windows from the first), and compares with the organizations
// sorted by _id; the small pages of the second walk read windows of _id.
func TestOrganizationsList_WindowedPagesListEveryOrganizationOnce(t *testing.T) {
	ctx := context.Background()
	var log findLog
	s := mongotest.OpenWith(t, mongo.Options{Monitor: log.monitor()})
	coll := mongo.CollectionsForTest(s)["organizations"]
	deleted := map[string]bool{}
	var ids []string
	for i := range 150 {
		id := fmt.Sprintf("org_page_%03d", i)
		orgAt(t, s, id, false, time.Now())
		if i%7 == 0 {
			orgAt(t, s, id, true, time.Now())
			deleted[id] = true
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return mongo.DocIDForTest(ids[i]).Hex() < mongo.DocIDForTest(ids[j]).Hex()
	})
	for _, includeDeleted := range []bool{false, true} {
		var want []string
		for _, id := range ids {
			if includeDeleted || !deleted[id] {
				want = append(want, id)
			}
		}
		for _, limit := range []int{9, 200} {
			for walk := range 2 {
				log.reset()
				f := models.OrganizationFilter{IncludeDeleted: includeDeleted, Limit: limit}
				var got []string
				for pages := 0; ; pages++ {
					page, err := s.Organizations().List(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range page.Organizations {
						got = append(got, o.OrgID)
					}
					if page.NextCursor == "" {
						break
					}
					if len(page.Organizations) != limit || pages > 300 {
						t.Fatalf("%+v: page %d of %d organizations with a next cursor", f, pages, len(page.Organizations))
					}
					f.After = page.NextCursor
				}
				if !slices.Equal(got, want) {
					t.Errorf("includeDeleted=%v limit %d walk %d: listed %v\nwant %v", includeDeleted, limit, walk, got, want)
				}
				if n := log.windows(coll, "_id"); walk == 1 && limit == 9 && n == 0 {
					t.Errorf("includeDeleted=%v limit %d walk %d: no find read a window of _id", includeDeleted, limit, walk)
				}
			}
		}
	}
}

// TestOrganizationsChanges_WindowedPagesServeEveryChangeOnceInOrder
// writes organizations at uneven times (the same millisecond, minutes and
// days apart), some deleted, and follows their change feed from long
// before, a few a page, twice; the second walk reads windows of
// updatedAt.
func TestOrganizationsChanges_WindowedPagesServeEveryChangeOnceInOrder(t *testing.T) {
	ctx := context.Background()
	var log findLog
	s := mongotest.OpenWith(t, mongo.Options{Monitor: log.monitor()})
	coll := mongo.CollectionsForTest(s)["organizations"]
	want, since, until := writeUnevenly(t, 80, func(i int, at time.Time) string {
		id := fmt.Sprintf("org_feed_%02d", i)
		orgAt(t, s, id, false, at)
		if i%6 == 0 {
			orgAt(t, s, id, true, at)
		}
		return id
	})
	followFeed(t, &log, coll, want, since, until, func(f models.ChangeFilter) ([]string, string, error) {
		page, err := s.Organizations().Changes(ctx, f)
		var got []string
		for _, o := range page.Organizations {
			got = append(got, o.OrgID)
		}
		return got, page.NextCursor, err
	})
}

// writeUnevenly calls write(i, at) for n objects at uneven times (the
// same millisecond, minutes and days apart) and returns the objects'
// ids in the change feed's order (their last write, then _id), and a
// feed's window from long before the first write to the last.
func writeUnevenly(t *testing.T, n int, write func(i int, at time.Time) string) (ids []string, since, until time.Time) {
	t.Helper()
	r := rand.New(rand.NewPCG(5, 6))
	at := time.Now().UTC().Truncate(time.Millisecond).Add(-60 * 24 * time.Hour)
	type written struct {
		id string
		at time.Time
	}
	var all []written
	for i := range n {
		switch r.IntN(4) {
		case 0:
			at = at.Add(time.Duration(1+r.IntN(5)) * 24 * time.Hour)
		case 1:
		default:
			at = at.Add(time.Duration(1+r.IntN(300)) * time.Second)
		}
		all = append(all, written{write(i, at), at})
	}
	sort.SliceStable(all, func(i, j int) bool {
		if !all[i].at.Equal(all[j].at) {
			return all[i].at.Before(all[j].at)
		}
		return mongo.DocIDForTest(all[i].id).Hex() < mongo.DocIDForTest(all[j].id).Hex()
	})
	for _, w := range all {
		ids = append(ids, w.id)
	}
	return ids, all[0].at.Add(-365 * 24 * time.Hour), at
}

// followFeed follows a change feed (page) from since to until, 6 a page,
// twice, and compares with want; the second walk starts a minute before
// the first change, and must read windows of updatedAt of coll.
func followFeed(t *testing.T, log *findLog, coll string, want []string, since, until time.Time,
	page func(models.ChangeFilter) ([]string, string, error)) {
	t.Helper()
	for walk := range 2 {
		log.reset()
		f := models.ChangeFilter{Since: since, Until: until, Limit: 6}
		if walk == 1 {
			f.Since = since.Add(365*24*time.Hour - time.Minute)
		}
		var got []string
		for pages := 0; pages < 100; pages++ {
			ids, next, err := page(f)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ids...)
			f.After = next
			if len(ids) < f.Limit {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("walk %d: feed served %v\nwant %v", walk, got, want)
		}
		if walk == 1 && log.windows(coll, "updatedAt") == 0 {
			t.Errorf("walk %d: no find read a window of updatedAt", walk)
		}
	}
}

// memberAt is a state of the membership of userID in orgID, written by
// Apply at now; its id is returned.
func memberAt(t *testing.T, s *mongo.Store, orgID, userID string, deleted, deprovisioned bool, now time.Time) string {
	t.Helper()
	id := "orgmem_" + orgID + "_" + userID
	ch := models.MembershipChange{MembershipID: id, OrgID: orgID, UserID: userID, EventID: "msg_" + id, SourceTime: t0,
		Role: "member", Metadata: json.RawMessage(`{}`), Member: models.Member{Deprovisioned: deprovisioned}}
	if deleted {
		ch = models.MembershipChange{MembershipID: id, OrgID: orgID, UserID: userID, EventID: "msg_del_" + id,
			SourceTime: t0.Add(time.Hour), Deleted: true}
	}
	if _, err := s.Memberships().Apply(context.Background(), ch, now); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMembershipsList_WindowedPagesListEveryMembershipOnce pages through
// the memberships of a large organization and of a user in many, active
// only and all, twice: every membership comes once in _id order, pages
// are full until the last although tombstones and memberships of
// deprovisioned users are passed over, and the small pages of the second
// walk read windows of _id.
func TestMembershipsList_WindowedPagesListEveryMembershipOnce(t *testing.T) {
	ctx := context.Background()
	var log findLog
	s := mongotest.OpenWith(t, mongo.Options{Monitor: log.monitor()})
	coll := mongo.CollectionsForTest(s)["memberships"]
	type mem struct {
		id, org, user string
		active        bool
	}
	var all []mem
	for i := range 120 {
		user := fmt.Sprintf("user_%03d", i)
		deprovisioned := i%5 == 0
		id := memberAt(t, s, "org_wide", user, false, deprovisioned, time.Now())
		if i%7 == 0 {
			memberAt(t, s, "org_wide", user, true, false, time.Now())
		}
		all = append(all, mem{id, "org_wide", user, i%7 != 0 && !deprovisioned})
	}
	for i := range 30 {
		org := fmt.Sprintf("org_%02d", i)
		id := memberAt(t, s, org, "user_support", false, false, time.Now())
		if i%4 == 0 {
			memberAt(t, s, org, "user_support", true, false, time.Now())
		}
		all = append(all, mem{id, org, "user_support", i%4 != 0})
	}
	sort.Slice(all, func(i, j int) bool {
		return mongo.DocIDForTest(all[i].id).Hex() < mongo.DocIDForTest(all[j].id).Hex()
	})
	for _, f := range []models.MembershipFilter{
		{OrgID: "org_wide"}, {OrgID: "org_wide", IncludeDeleted: true}, {UserID: "user_support"}, {UserID: "user_support", IncludeDeleted: true},
	} {
		var want []string
		for _, m := range all {
			if (m.org == f.OrgID || m.user == f.UserID) && (f.IncludeDeleted || m.active) {
				want = append(want, m.id)
			}
		}
		for _, limit := range []int{9, 200} {
			for walk := range 2 {
				log.reset()
				f := f
				f.Limit = limit
				var got []string
				for pages := 0; ; pages++ {
					page, err := s.Memberships().List(ctx, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range page.Memberships {
						got = append(got, m.MembershipID)
					}
					if page.NextCursor == "" {
						break
					}
					if len(page.Memberships) != limit || pages > 300 {
						t.Fatalf("%+v: page %d of %d memberships with a next cursor", f, pages, len(page.Memberships))
					}
					f.After = page.NextCursor
				}
				if !slices.Equal(got, want) {
					t.Errorf("%+v walk %d: listed %v\nwant %v", f, walk, got, want)
				}
				if n := log.windows(coll, "_id"); f.OrgID != "" && walk == 1 && limit == 9 && n == 0 {
					t.Errorf("%+v walk %d: no find read a window of _id", f, walk)
				}
			}
		}
	}
}

// TestMembershipsChanges_WindowedPagesServeEveryChangeOnceInOrder writes
// memberships at uneven times, some deleted, and follows their change
// feed from long before, a few a page, twice; the second walk reads
// windows of updatedAt.
func TestMembershipsChanges_WindowedPagesServeEveryChangeOnceInOrder(t *testing.T) {
	ctx := context.Background()
	var log findLog
	s := mongotest.OpenWith(t, mongo.Options{Monitor: log.monitor()})
	coll := mongo.CollectionsForTest(s)["memberships"]
	want, since, until := writeUnevenly(t, 80, func(i int, at time.Time) string {
		org, user := fmt.Sprintf("org_%d", i%3), fmt.Sprintf("user_feed_%02d", i)
		id := memberAt(t, s, org, user, false, false, at)
		if i%6 == 0 {
			memberAt(t, s, org, user, true, false, at)
		}
		return id
	})
	followFeed(t, &log, coll, want, since, until, func(f models.ChangeFilter) ([]string, string, error) {
		page, err := s.Memberships().Changes(ctx, f)
		var got []string
		for _, m := range page.Memberships {
			got = append(got, m.MembershipID)
		}
		return got, page.NextCursor, err
	})
}

// TestEventsList_AFilterWithFewEventsIsOneQuery: once a first page of a
// filter of the log found fewer events than it asked for in the whole
// log, its next pages are one query through its own index (windows would
// read every event of their range to find none), and list the same.
func TestEventsList_AFilterWithFewEventsIsOneQuery(t *testing.T) {
	ctx := context.Background()
	var finds atomic.Int64
	s := mongotest.OpenWith(t, mongo.Options{Monitor: &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			if e.CommandName == "find" {
				finds.Add(1)
			}
		},
	}})
	pagingEvents(t, s, 150, time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour))
	f := models.EventFilter{Kind: models.KindMembership, Limit: 50} // none: every event is a user's
	first, err := s.Events().List(ctx, f)
	if err != nil || len(first.Events) != 0 {
		t.Fatalf("first page = %d events, %v; want none", len(first.Events), err)
	}
	finds.Store(0)
	if page, err := s.Events().List(ctx, f); err != nil || len(page.Events) != 0 {
		t.Fatalf("next page = %d events, %v; want none", len(page.Events), err)
	}
	if n := finds.Load(); n != 1 {
		t.Errorf("a page of a filter with few events took %d finds, want 1", n)
	}
}
