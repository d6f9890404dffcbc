package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	stdsync "sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/sqlite"
)

// The seeded data, in a form a kept database can be extended from:
//   - user i is seedUser(i), created by the user.created event
//     "msg_seed_user_<i>" at Clerk time epoch + i ms (that event itself
//     is not in the log, as if retention had removed it);
//   - event k is "msg_seed_<k>", a processed user.updated of user k mod N
//     (N: the users of the size it was seeded for), received at
//     epoch + k s.
//
// How far each has been seeded is kept in the seedCollection, so that a
// rerun with -keep adds only what is missing.
const seedCollection = "scale_seeded"

func seedUser(i int) string  { return "user_seed" + strconv.Itoa(i) }
func seedEvent(k int) string { return "msg_seed_" + strconv.Itoa(k) }
func seedOrg(i int) string   { return "org_seed" + strconv.Itoa(i) }

// seeded is what seedTo found and did.
type seeded struct {
	hadUsers, hadEvents int
	users, events       int           // added
	usersIn, eventsIn   time.Duration // time spent adding them
	orgs, memberships   int           // added
	orgsIn              time.Duration // time spent adding both
	payers              int           // added
	payersIn            time.Duration // time spent adding them
	deliveries, outbox  int           // added
	deliveriesIn        time.Duration // time spent adding both
}

type seedState struct {
	Users       int `bson:"users" json:"users"`
	Events      int `bson:"events" json:"events"`
	Orgs        int `bson:"orgs" json:"orgs"`
	Memberships int `bson:"memberships" json:"memberships"`
	Payers      int `bson:"payers" json:"payers"`
	Deliveries  int `bson:"deliveries" json:"deliveries"`
	Outbox      int `bson:"outbox" json:"outbox"`
}

// setupTimeout bounds each untimed step (a seeding call, a lookup),
// instead of the store's operation timeout.
const setupTimeout = 10 * time.Minute

func (b *bench) seedState(ctx context.Context) (seedState, error) {
	var st seedState
	if m, ok := b.store.(*mongo.Store); ok {
		err := m.Database().Collection(seedCollection).FindOne(ctx, bson.D{{Key: "_id", Value: "seeded"}}).Decode(&st)
		if errors.Is(err, driver.ErrNoDocuments) {
			return seedState{}, nil
		}
		return st, err
	}
	raw, err := os.ReadFile(b.seedFile())
	if errors.Is(err, fs.ErrNotExist) {
		return seedState{}, nil
	}
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(raw, &st)
}

func (b *bench) saveSeedState(ctx context.Context, st seedState) error {
	if m, ok := b.store.(*mongo.Store); ok {
		_, err := m.Database().Collection(seedCollection).UpdateOne(ctx, bson.D{{Key: "_id", Value: "seeded"}},
			bson.D{{Key: "$set", Value: st}}, options.UpdateOne().SetUpsert(true))
		return err
	}
	raw, _ := json.Marshal(st)
	return os.WriteFile(b.seedFile(), raw, 0o600)
}

// seedFile keeps the seed state of the embedded store beside its file.
func (b *bench) seedFile() string {
	return filepath.Join(filepath.Dir(b.store.(*sqlite.Store).Path()), "scale-seeded.json")
}

// seedTo seeds users and events until s.users and s.events are present.
func (b *bench) seedTo(ctx context.Context, s size) (seeded, error) {
	st, err := b.seedState(ctx)
	if err != nil {
		return seeded{}, fmt.Errorf("read seed state: %w", err)
	}
	res := seeded{hadUsers: st.Users, hadEvents: st.Events}
	if st.Users > s.users || st.Events > s.events {
		fmt.Fprintf(b.progress, "note: the database holds %d users and %d events, more than this size asks for\n", st.Users, st.Events)
	}
	now := seedTime(time.Now())
	start := time.Now()
	err = b.seedRange(ctx, "users", st.Users, s.users, func(lo, hi int) error {
		ctx, cancel := context.WithTimeout(ctx, setupTimeout)
		defer cancel()
		return b.seedUsers(ctx, lo, hi, now)
	}, func(n int) error {
		st.Users = n
		return b.saveSeedState(ctx, st)
	})
	if err != nil {
		return res, err
	}
	res.users, res.usersIn = max(s.users-res.hadUsers, 0), time.Since(start)
	start = time.Now()
	n := max(s.users, 1)
	err = b.seedRange(ctx, "events", st.Events, s.events, func(lo, hi int) error {
		ctx, cancel := context.WithTimeout(ctx, setupTimeout)
		defer cancel()
		return b.seedEvents(ctx, lo, hi, n)
	}, func(n int) error {
		st.Events = n
		return b.saveSeedState(ctx, st)
	})
	res.events, res.eventsIn = max(s.events-res.hadEvents, 0), time.Since(start)
	if err != nil {
		return res, err
	}
	start = time.Now()
	res.orgs, res.memberships = max(s.orgs-st.Orgs, 0), max(s.memberships-st.Memberships, 0)
	err = b.seedRange(ctx, "organizations", st.Orgs, s.orgs, func(lo, hi int) error {
		return b.applyEach(ctx, lo, hi, func(ctx context.Context, i int) error {
			_, err := b.store.Organizations().Apply(ctx, seedOrgChange(i, now), now)
			return err
		})
	}, func(n int) error {
		st.Orgs = n
		return b.saveSeedState(ctx, st)
	})
	if err != nil {
		return res, err
	}
	err = b.seedRange(ctx, "memberships", st.Memberships, s.memberships, func(lo, hi int) error {
		return b.applyEach(ctx, lo, hi, func(ctx context.Context, i int) error {
			_, err := b.store.Memberships().Apply(ctx, seedMembership(i, s.orgs), now)
			return err
		})
	}, func(n int) error {
		st.Memberships = n
		return b.saveSeedState(ctx, st)
	})
	res.orgsIn = time.Since(start)
	if err != nil {
		return res, err
	}
	start = time.Now()
	res.payers = max(s.payers-st.Payers, 0)
	err = b.seedRange(ctx, "payers", st.Payers, s.payers, func(lo, hi int) error {
		return b.applyEach(ctx, lo, hi, func(ctx context.Context, i int) error {
			ev, ch, err := seedPayer(i, now)
			if err == nil {
				_, err = b.store.Deliver(ctx, ev, ch, now)
			}
			return err
		})
	}, func(n int) error {
		st.Payers = n
		return b.saveSeedState(ctx, st)
	})
	res.payersIn = time.Since(start)
	if err != nil {
		return res, err
	}
	return res, b.seedOutbound(ctx, s, &st, &res, now)
}

// itemBody is a subscriptionItem.updated webhook body: payer user userID's
// item, active on plan slug, at Clerk time at.
func itemBody(userID, slug string, at time.Time) []byte {
	ms := at.UnixMilli()
	return []byte(fmt.Sprintf(`{"object":"event","type":"subscriptionItem.updated","timestamp":%d,"data":{"object":"subscription_item",`+
		`"id":"csub_item_%s","status":"active","plan":{"id":"cplan_%s","slug":%q,"name":%q},"payer":{"user_id":%q,"organization_id":""},`+
		`"period_end":%d,"updated_at":%d}}`, ms, strings.TrimPrefix(userID, "user_"), slug, slug, slug, userID, ms+30*24*3600*1000, ms))
}

// seedPayer is the delivery of payer i's item, as its webhook carried it.
func seedPayer(i int, now time.Time) (models.Event, models.Change, error) {
	userID := seedUser(i)
	at := epoch.Add(time.Duration(i) * time.Millisecond)
	body := itemBody(userID, "pro", at)
	ce, err := models.DecodeEvent(body)
	if err != nil {
		return models.Event{}, nil, err
	}
	id := "msg_seed_payer_" + strconv.Itoa(i)
	ch, err := ce.Decode(id, now)
	if err != nil {
		return models.Event{}, nil, err
	}
	_, objectID := ch.IDs()
	ts := at.UTC()
	return models.Event{EventID: id, Type: ce.Type, EventType: ce.EventType(), UserID: userID, ObjectID: objectID, RawBody: body,
		Source: models.SourceClerk, SourceTimestamp: &ts, ReceivedAt: now.UTC().Truncate(time.Millisecond), Status: models.StatusStored}, ch, nil
}

// applyEach applies the objects [lo, hi) through the store's Apply, 16 at
// a time (the embedded store commits concurrent writes together), as their
// webhooks would have.
func (b *bench) applyEach(ctx context.Context, lo, hi int, apply func(context.Context, int) error) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	next := make(chan int)
	errs := make(chan error, 16)
	var wg stdsync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := apply(ctx, i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	go func() {
		defer close(next)
		for i := lo; i < hi; i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	return <-errs
}

// seedOrgChange is the state organization i was created in.
func seedOrgChange(i int, now time.Time) models.OrganizationChange {
	return models.OrganizationChange{
		OrgID: seedOrg(i), EventID: "msg_seed_org_" + strconv.Itoa(i), SourceTime: epoch.Add(time.Duration(i) * time.Millisecond),
		Metadata: json.RawMessage(`{"plan":"team"}`),
		OrganizationProfile: models.OrganizationProfile{
			Name: "Organization " + strconv.Itoa(i), Slug: "org-seed-" + strconv.Itoa(i), CreatedBy: seedUser(i),
		},
	}
}

// seedMembership is membership i: user i's, in organization i mod orgs.
func seedMembership(i, orgs int) models.MembershipChange {
	return models.MembershipChange{
		MembershipID: "orgmem_seed" + strconv.Itoa(i), EventID: "msg_seed_mem_" + strconv.Itoa(i),
		SourceTime: epoch.Add(time.Duration(i) * time.Millisecond), OrgID: seedOrg(i % orgs), UserID: seedUser(i),
		Role: "org:member", RoleName: "Member", Permissions: []string{"org:sys_profile:read"},
		Metadata: json.RawMessage(`{}`), Member: models.Member{FirstName: "Seed", Identifier: primaryEmail(seedUser(i))},
	}
}

// seedUsers seeds users [lo, hi) through the repository, as their
// user.created events would have written them.
func (b *bench) seedUsers(ctx context.Context, lo, hi int, now time.Time) error {
	changes := make([]models.UserChange, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ce, err := models.DecodeEvent(b.body.make("user.created", seedUser(i), epoch.Add(time.Duration(i)*time.Millisecond)))
		if err != nil {
			return err
		}
		ch, err := ce.UserChange("msg_seed_user_"+strconv.Itoa(i), time.Now())
		if err != nil {
			return err
		}
		changes = append(changes, ch)
	}
	// As a backfill leaves them: written over time, seedUsersPerMs users a
	// millisecond (user i at now less (maxSeedUsers-i)/seedUsersPerMs ms),
	// not all in one millisecond, which no window of time could split.
	for len(changes) > 0 {
		i := hi - len(changes)
		n := min(len(changes), seedUsersPerMs-i%seedUsersPerMs)
		at := now.Add(-time.Duration((maxSeedUsers-i)/seedUsersPerMs) * time.Millisecond)
		if err := b.seedChanges(ctx, changes[:n], at); err != nil {
			return err
		}
		changes = changes[n:]
	}
	return nil
}

// seedUsersPerMs and maxSeedUsers place the seeded users' updatedAt (see
// seedUsers): 10M users span 100 s before the seed time.
const seedUsersPerMs, maxSeedUsers = 100, 10_000_000

// seedEvents seeds events [lo, hi) for users [0, users).
func (b *bench) seedEvents(ctx context.Context, lo, hi, users int) error {
	evs := make([]models.Event, 0, hi-lo)
	for k := lo; k < hi; k++ {
		at := epoch.Add(time.Duration(k) * time.Second)
		evs = append(evs, b.event(seedEvent(k), "user.updated", seedUser(k%users), at, at,
			models.StatusProcessed, models.OutcomeApplied))
	}
	return b.seedEventList(ctx, evs)
}

// event is an event as the service stores it after processing (status
// processed) or after a failed attempt (status failed, due for a retry).
func (b *bench) event(eventID, typ, userID string, sourceTime, receivedAt time.Time, status models.EventStatus, outcome models.Outcome) models.Event {
	body := b.body.make(typ, userID, sourceTime)
	sig, _ := b.wh.Sign(eventID, receivedAt, body)
	ts := sourceTime.UTC().Truncate(time.Millisecond)
	ev := models.Event{
		EventID:         eventID,
		Type:            typ,
		EventType:       models.EventUpdated,
		UserID:          userID,
		RawBody:         body,
		Source:          models.SourceClerk,
		Signature:       sig,
		SignatureValid:  new(true),
		SourceTimestamp: &ts,
		ReceivedAt:      receivedAt.UTC().Truncate(time.Millisecond),
		Status:          status,
		Attempts:        1,
	}
	if typ == "user.created" {
		ev.EventType = models.EventCreated
	}
	switch status {
	case models.StatusProcessed:
		at := ev.ReceivedAt.Add(5 * time.Millisecond)
		ev.ProcessedAt, ev.Outcome = &at, outcome
	case models.StatusFailed:
		retry := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
		ev.Error, ev.RetryAt = "apply event: the database did not answer", &retry
	}
	return ev
}

// seedRange calls insert on batches of [from, to), -seed-workers at a
// time, and done with the end of the longest prefix inserted so far.
// Progress goes to stderr.
func (b *bench) seedRange(ctx context.Context, what string, from, to int, insert func(lo, hi int) error, done func(n int) error) error {
	if from >= to {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		lo, hi int
		err    error
	}
	jobs := make(chan [2]int)
	results := make(chan result)
	var wg stdsync.WaitGroup
	for range b.o.workers {
		wg.Go(func() {
			for j := range jobs {
				results <- result{j[0], j[1], insert(j[0], j[1])}
			}
		})
	}
	go func() {
		defer close(jobs)
		for lo := from; lo < to; lo += b.o.batch {
			select {
			case jobs <- [2]int{lo, min(lo+b.o.batch, to)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	finished := map[int]int{} // lo → hi of batches inserted beyond the prefix
	prefix, start, last := from, time.Now(), time.Now()
	var firstErr error
	for r := range results {
		if r.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("seed %s %d to %d: %w", what, r.lo, r.hi, r.err)
			cancel()
		}
		if firstErr != nil {
			continue
		}
		finished[r.lo] = r.hi
		for hi, ok := finished[prefix]; ok; hi, ok = finished[prefix] {
			delete(finished, prefix)
			prefix = hi
		}
		if err := done(prefix); err != nil {
			firstErr = fmt.Errorf("save seed state: %w", err)
			cancel()
			continue
		}
		if time.Since(last) > 5*time.Second || prefix == to {
			last = time.Now()
			el := time.Since(start)
			fmt.Fprintf(b.progress, "seeding %s: %d / %d (%.0f/s, %s)\n", what, prefix, to,
				float64(prefix-from)/el.Seconds(), el.Round(time.Second))
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// seedTime is the time seeded records are written at (their updatedAt):
// earlier than now by more than the change feed's settling time, so that
// the feed serves them at once, and a run that seeds and measures times
// full pages of it, not empty ones.
func seedTime(now time.Time) time.Time {
	return now.Add(-2 * models.ChangeSettle).UTC().Truncate(time.Millisecond)
}
