package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// rekeyCollection keeps each user being re-keyed, so that a migration
// stopped half-way loses no user: the next one finishes it.
const rekeyCollection = "users_rekey"

// maxRekeyPasses bounds the passes over users of one migration. Each pass
// re-keys what the previous one's cursor skipped; a re-keyed user is never
// re-keyed again (its _id is derived from its userId), so a few passes
// suffice and more mean something is wrong.
const maxRekeyPasses = 10

// checkedDocID is docID for a user's userId, which a user must have:
// docID gives a key-less document a new random _id each time, which a
// migration would take for a user to re-key, again and again.
func checkedDocID(key string) (bson.ObjectID, error) {
	if key == "" {
		return bson.ObjectID{}, fmt.Errorf("no key to derive an _id from: %w", models.ErrInvalid)
	}
	return docID(key), nil
}

// Migrate brings a database written by an older usersync up to this one
// (repository.Migrator), and may run any number of times. With dryRun it
// changes nothing, and reports what it would do. It
//   - refuses, as Prepare does and before it changes anything, an engine
//     that cannot hold usersync's rules and a database that is not
//     usersync's (models.ErrForeignData): it changes only a database that
//     carries usersync's mark, or whose usersync-named collections hold
//     documents of usersync's shape (see ownership.go);
//   - creates the collections and the unique indexes, as Prepare does;
//   - gives every user the _id derived from its userId (an older version
//     drew random ones). A user is copied aside, then removed, then
//     written under its new _id with every field as it was, then the copy
//     removed: no user is removed before its copy is stored, and a run
//     stopped at any point is finished by the next. A user document
//     without a userId, or not of usersync's shape, stops the migration
//     with an error naming it, before anything of it changes;
//   - counts the processed events into the outcome counters (once: a
//     full read of the events);
//     (these two steps for a database of schema 1 or none);
//   - recomputes every active user's email from its last applied payload
//     by models.NormalizeEmail's rule (schema 3, see emails.go);
//   - marks the database, then builds every missing index and drops the
//     obsolete ones (EnsureIndexes).
//
// No older usersync may write to the database meanwhile.
//
// Each step for older data says, with a Reads and a Remove line, which
// data it reads and when it may go (the table "Upgrade code and when it
// goes" in docs/operations.md). Once the steps for a schema go, Migrate
// refuses a database of that schema and names the rebuild from Clerk
// instead of marking it unchanged.
func (s *Store) Migrate(ctx context.Context, dryRun bool) (repository.MigrateReport, error) {
	// One deadline for the whole run: the client's operation timeout would
	// otherwise bound the cursor over every user.
	ctx, cancel := context.WithTimeout(ctx, indexBuildTimeout)
	defer cancel()
	var m migration
	own, sv, err := s.inspect(ctx)
	if err != nil {
		return m.report(dryRun), err
	}
	m.mark = sv.mark == nil || sv.mark.Schema != schemaVersion
	m.older = own == ownOlder
	m.rekey = m.older && schemaOf(sv) < schemaRekeyed
	if dryRun {
		err := s.planMigration(ctx, &m)
		return m.report(true), err
	}
	if err := s.setUp(ctx, sv, !m.older); err != nil {
		return m.report(false), err
	}
	if m.older {
		if m.rekey {
			if err := s.rekeyUsers(ctx, &m); err != nil {
				return m.report(false), err
			}
			if err := s.recount(ctx, &m); err != nil {
				return m.report(false), err
			}
		}
		fixes, fills, err := s.payloadFixes(ctx)
		if err != nil {
			return m.report(false), err
		}
		m.emails, err = s.recomputeEmails(ctx, fixes, time.Now())
		if err != nil {
			return m.report(false), err
		}
		if m.created, err = s.fillCreated(ctx, fills); err != nil {
			return m.report(false), err
		}
		m.recomputed = true
		if err := s.writeMark(ctx, time.Now()); err != nil {
			return m.report(false), err
		}
		s.owned = true
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		return m.report(false), err
	}
	m.indexes = true
	return m.report(false), nil
}

// migration is what a migration did, or would do.
type migration struct {
	mark, older bool
	rekey       bool // users to re-key and events to count (schema 1 or none)
	users       int  // user documents read
	rekeyed     int  // users given their derived _id
	finished    int  // of which a stopped run had left aside
	processed   int64
	recounted   bool
	emails      int // users whose email was recomputed (or would be)
	created     int // users whose sourceCreatedAt was filled (or would be)
	recomputed  bool
	indexes     bool
}

func (m migration) report(dryRun bool) repository.MigrateReport {
	var done []string
	verb := func(did, would string) string {
		if dryRun {
			return would
		}
		return did
	}
	if m.rekey {
		s := fmt.Sprintf("%s %d of %d users", verb("re-keyed", "would re-key"), m.rekeyed, m.users)
		if m.finished > 0 {
			s += fmt.Sprintf(" (%d left aside by a stopped run)", m.finished)
		}
		done = append(done, s)
		if m.recounted || dryRun {
			done = append(done, fmt.Sprintf("%s %d processed events into the outcome counters", verb("counted", "would count"), m.processed))
		}
	}
	if m.older && (m.recomputed || dryRun) {
		done = append(done, fmt.Sprintf("%s the email of %d users from their last events", verb("recomputed", "would recompute"), m.emails),
			fmt.Sprintf("%s Clerk's creation time of %d users from their last events", verb("filled", "would fill"), m.created))
	}
	if m.mark && (m.indexes || dryRun) {
		done = append(done, verb("marked the database as usersync's", "would mark the database as usersync's"))
	}
	if m.indexes || dryRun {
		done = append(done, verb("built the missing indexes", "would build the missing indexes"))
	}
	// The caller says whether it was a dry run; the verbs say what.
	summary := strings.Join(done, ", ")
	if len(done) == 0 {
		summary = "nothing done"
	}
	return repository.MigrateReport{Changed: m.rekeyed + m.emails + m.created, Summary: summary}
}

// planMigration is Migrate's dry run: it reads what the migration would
// change, and finds what would stop it, changing nothing.
func (s *Store) planMigration(ctx context.Context, m *migration) error {
	if !m.older {
		return nil
	}
	fixes, fills, err := s.payloadFixes(ctx)
	if err != nil {
		return err
	}
	m.emails, m.created = len(fixes), len(fills)
	if !m.rekey {
		return nil
	}
	aside := s.db.Collection(s.names.of(rekeyCollection))
	err = eachDoc(ctx, aside, func(raw bson.Raw) error {
		if _, err := rekeyTarget(raw); err != nil {
			return err
		}
		m.finished++
		m.rekeyed++
		return nil
	})
	if err != nil {
		return err
	}
	err = eachDoc(ctx, s.users.primary, func(raw bson.Raw) error {
		m.users++
		id, err := rekeyTarget(raw)
		if err != nil {
			return err
		}
		if !sameID(raw, id) {
			m.rekeyed++
		}
		return nil
	})
	if err != nil {
		return err
	}
	n, err := s.events.primary.CountDocuments(ctx, bson.D{{Key: "status", Value: models.StatusProcessed}})
	if err != nil {
		return fmt.Errorf("count processed events: %w", translate(err))
	}
	m.processed = n
	return nil
}

// rekeyTarget checks that raw is a user document of usersync's and
// returns the _id it must have. Its error wraps models.ErrForeignData and
// names the document by its _id only (its fields may be personal data).
func rekeyTarget(raw bson.Raw) (bson.ObjectID, error) {
	if reason := foreignShape(UsersCollection, raw); reason != "" {
		return bson.ObjectID{}, fmt.Errorf("user document _id %s: %s: it is not usersync's, or it is damaged; "+
			"migrate changed nothing of it: remove it or fix it, then run migrate again: %w",
			idString(raw.Lookup("_id")), strings.TrimPrefix(reason, "a document "), models.ErrForeignData)
	}
	userID, _ := raw.Lookup("userId").StringValueOK()
	return checkedDocID(userID)
}

// idString writes an _id as the mongo shell does.
func idString(v bson.RawValue) string {
	if oid, ok := v.ObjectIDOK(); ok {
		return `ObjectId("` + oid.Hex() + `")`
	}
	if s, ok := v.StringValueOK(); ok {
		return strconv.Quote(s)
	}
	if n, ok := v.AsInt64OK(); ok {
		return strconv.FormatInt(n, 10)
	}
	return v.String()
}

func sameID(raw bson.Raw, id bson.ObjectID) bool {
	got, ok := raw.Lookup("_id").ObjectIDOK()
	return ok && got == id
}

// eachDoc calls fn with every document of coll, read from the primary.
func eachDoc(ctx context.Context, coll *mongo.Collection, fn func(bson.Raw) error) error {
	cur, err := coll.Find(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("read %s: %w", coll.Name(), translate(err))
	}
	defer cur.Close(context.WithoutCancel(ctx))
	for cur.Next(ctx) {
		if err := fn(slices.Clone(cur.Current)); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("read %s: %w", coll.Name(), translate(err))
	}
	return nil
}

// recount sets the outcome counters to the processed events there are.
// A run stopped half-way leaves the counters wrong and the database
// unmarked: the next run counts again.
//
// Reads: the event log of a database of schema 0 (no mark: written by
// versions before 26e2129, 2026-11-21, "migrate: re-key users, count
// processed events into the counters"), whose counters may not count it.
// Remove: with rekeyUsers, in the first release after no database of
// schema 0 is left.
func (s *Store) recount(ctx context.Context, m *migration) error {
	c := s.events.counters
	if _, err := c.coll.DeleteMany(ctx, outcomeCountersFilter); err != nil {
		return fmt.Errorf("reset event counters: %w", translate(err))
	}
	for _, o := range outcomes {
		n, err := s.events.primary.CountDocuments(ctx, bson.D{
			{Key: "status", Value: models.StatusProcessed}, {Key: "outcome", Value: o},
			{Key: "uncounted", Value: nil}, // the flagged ones are counted as such (see counters.go)
		})
		if err != nil {
			return fmt.Errorf("count %s events: %w", o, translate(err))
		}
		if err := c.add(ctx, o, bson.ObjectID{}, n); err != nil {
			return err
		}
		m.processed += n
	}
	m.recounted = true
	return nil
}

// rekeyUsers gives every user the _id derived from its userId, first
// finishing what a stopped run left aside, then in passes over users
// until one finds nothing to do (a cursor over a collection that changes
// may skip documents).
//
// Reads: the users of a database of schema 0 (no mark: written by
// versions before 26e2129, 2026-11-21); only versions before a6aede5, the
// same day ("Users keyed by a derived _id"), drew random _ids.
// Remove: with recount, in the first release after no database of schema
// 0 is left; rekeyUser, rekeyTarget, checkedDocID, withID, the re-key
// count of planMigration, rekeyCollection and their tests go with it.
func (s *Store) rekeyUsers(ctx context.Context, m *migration) error {
	aside := s.db.Collection(s.names.of(rekeyCollection))
	err := eachDoc(ctx, aside, func(raw bson.Raw) error {
		if err := s.rekeyUser(ctx, aside, raw, false); err != nil {
			return err
		}
		m.finished++
		m.rekeyed++
		return nil
	})
	if err != nil {
		return err
	}
	for pass := 1; ; pass++ {
		n, users := 0, 0
		err := eachDoc(ctx, s.users.primary, func(raw bson.Raw) error {
			users++
			id, err := rekeyTarget(raw)
			if err != nil {
				return err
			}
			if sameID(raw, id) {
				return nil
			}
			if err := s.rekeyUser(ctx, aside, raw, true); err != nil {
				return err
			}
			n++
			return nil
		})
		if pass == 1 {
			m.users = users
		}
		m.rekeyed += n
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if pass == maxRekeyPasses {
			return fmt.Errorf("re-key users: still %d to re-key after %d passes; is another program writing to %s?",
				n, pass, s.users.primary.Name())
		}
	}
	if err := aside.Drop(ctx); err != nil {
		return fmt.Errorf("drop %s: %w", aside.Name(), translate(err))
	}
	return nil
}

// rekeyUser moves the user document raw to its derived _id, keeping every
// field as it is. copyAside is false when raw is already the copy aside
// (a stopped run's).
//
// The copy aside is stored before the user is removed, and removed only
// once the user is stored under its new _id: at every step the user is in
// users or aside. The user is removed before it is written again because
// the unique userId and email indexes refuse two copies in users.
func (s *Store) rekeyUser(ctx context.Context, aside *mongo.Collection, raw bson.Raw, copyAside bool) error {
	userID, _ := raw.Lookup("userId").StringValueOK()
	id, err := rekeyTarget(raw)
	if err != nil {
		return err
	}
	old := bson.D{{Key: "_id", Value: raw.Lookup("_id")}}
	if copyAside {
		if _, err := aside.ReplaceOne(ctx, old, raw, options.Replace().SetUpsert(true)); err != nil {
			return fmt.Errorf("re-key user %s: copy it aside: %w", userID, translate(err))
		}
	}
	if _, err := s.users.primary.DeleteOne(ctx, old); err != nil {
		return fmt.Errorf("re-key user %s: %w", userID, translate(err))
	}
	doc, err := withID(raw, id)
	if err != nil {
		return fmt.Errorf("re-key user %s: %w", userID, err)
	}
	if err := translate(insertOne(ctx, s.users.primary, doc)); err != nil {
		if !errors.Is(err, errDuplicate) {
			return fmt.Errorf("re-key user %s (kept in %s): %w", userID, aside.Name(), err)
		}
		// Stored before a stop, or a clash: only the first lets the copy go.
		var there struct {
			UserID string `bson:"userId"`
		}
		if ferr := findByID(ctx, s.users.primary, id, &there, bson.D{{Key: "userId", Value: 1}}); ferr != nil || there.UserID != userID {
			return fmt.Errorf("re-key user %s (kept in %s): %w", userID, aside.Name(), err)
		}
	}
	if _, err := aside.DeleteOne(ctx, old); err != nil {
		return fmt.Errorf("re-key user %s: %w", userID, translate(err))
	}
	return nil
}

// withID is the document raw with _id id, every other field as it is.
func withID(raw bson.Raw, id bson.ObjectID) (bson.D, error) {
	var d bson.D
	if err := bson.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("read user document: %w", err)
	}
	for i := range d {
		if d[i].Key == "_id" {
			d[i].Value = id
			return d, nil
		}
	}
	return append(bson.D{{Key: "_id", Value: id}}, d...), nil
}
