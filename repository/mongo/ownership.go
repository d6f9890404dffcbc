package mongo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/usersync/usersync/models"
)

// Ownership: usersync touches only data it owns.
//
// A database usersync prepares carries its mark, a document of its own
// collection (MetaCollection: {_id: "usersync", schema, createdAt}).
// usersync works in a database that holds none of its collection names
// with documents in them (it then prepares and marks it), or one that
// carries its mark. A database whose collections of those names hold
// documents of another program, with no mark, is refused before any
// collection or index is created: an application's own users collection
// must never get usersync's unique indexes or be rewritten by migrate.
// A database of an older usersync (its collections, documents of its
// shape, no mark) is marked by Migrate.
//
// Teams that must share a database give usersync's collections a prefix
// (Options.CollectionPrefix): the mark, and the rule, then apply to the
// prefixed names.

// MetaCollection holds usersync's mark on a database it prepared.
const MetaCollection = "usersync_meta"

// markID is the _id of the mark.
const markID = "usersync"

// schemaVersion is the shape of the data this version writes. Schema 2:
// every user has the _id derived from its userId; the outcome counters
// count the processed events (the earlier versions' mark,
// legacySchemaMark, says schema 2; a marked database replaces it). Schema
// 3: emails as models.NormalizeEmail makes them (see emails.go). A
// database of an older schema is refused by serve until usersync migrate
// brings it up to this one.
const schemaVersion = 3

// schemaRekeyed is the schema from which users have their derived _id and
// the outcome counters count the processed events.
const schemaRekeyed = 2

// legacySchemaMark is the counters document by which earlier versions
// marked a database as migrated to schemaVersion.
//
// Reads: the mark of a database of schema 2 written by versions from
// 26e2129 (2026-11-21) to before a2f1dd2 (2026-11-25, "Prepare names the
// engine, works only in a database that is usersync's"), which wrote no
// usersync_meta mark.
// Remove: with the steps for schema below 3 (see Migrate), in the first
// release after no database of schema below 3 is left. The document stays
// in the databases Migrate marked since: foreignShape keeps taking a
// counters document named migration:* as usersync's.
const legacySchemaMark = "migration:schema_2"

// schemaOf is the schema of the data a survey found: its mark's, schema 2
// for an earlier version's mark, 0 for none.
func schemaOf(sv survey) int {
	switch {
	case sv.mark != nil:
		return sv.mark.Schema
	case sv.legacyMark:
		return schemaRekeyed
	}
	return 0
}

// markDoc is the mark.
type markDoc struct {
	ID        string    `bson:"_id"`
	Schema    int       `bson:"schema"`
	CreatedAt time.Time `bson:"createdAt"`
}

// collNames are the names of usersync's collections in one database.
type collNames struct{ prefix string }

func (n collNames) of(base string) string { return n.prefix + base }

// ownedCollections are the base names of every collection usersync
// writes, the mark's included.
var ownedCollections = []string{
	UsersCollection, EventsCollection, CountersCollection, LeasesCollection, rekeyCollection, MetaCollection,
	ActivityCollection, RunsCollection, OrganizationsCollection, MembershipsCollection, InvitationsCollection,
	SubscriptionsCollection, SubscriptionItemsCollection, PaymentAttemptsCollection, BillingPlansCollection,
	EndpointsCollection, DeliveriesCollection, DeliveryAttemptsCollection,
}

// prefixPattern is what a collection prefix may hold: a collection name
// may not hold $ or NUL, nor start with "system.".
var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)

func checkPrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) || strings.HasPrefix(prefix, "system.") || len(prefix) > 64 {
		return fmt.Errorf("collection prefix %q: use letters, digits, _, - and . (at most 64), not starting with system.: %w",
			prefix, models.ErrInvalid)
	}
	return nil
}

// survey is what usersync reads of a database before it writes anything:
// its mark, and of each of its collections that exists (by base name) a
// sample of documents and the indexes.
type survey struct {
	db         string
	prefix     string
	mark       *markDoc
	legacyMark bool
	colls      map[string]collSurvey
}

type collSurvey struct {
	sample  []bson.Raw // the first documents, up to surveySample
	indexes []indexSpec
	// kind is what listCollections says the collection is: "collection"
	// (or "" from an engine that does not say), "view", "timeseries".
	kind string
	// validator: the collection has a validator (usersync sets none).
	validator bool
}

// records are the collections of usersync's own bookkeeping, which no
// application writes in usersync's shapes: an older usersync is
// recognised by them, never by the shape of its objects alone (an
// application's users may well have a userId and a sourceUpdatedAt).
var records = []string{EventsCollection, CountersCollection, LeasesCollection, ActivityCollection, RunsCollection}

// surveySample is how many documents of a collection the survey judges.
const surveySample = 20

// ownership is what a survey says of a database.
type ownership int

const (
	// ownFresh: none of usersync's collections holds a document; usersync
	// prepares and marks the database.
	ownFresh ownership = iota + 1
	// ownMarked: the database carries usersync's mark, or the mark of an
	// earlier version over documents of usersync's shape.
	ownMarked
	// ownOlder: usersync's collections hold documents of an older
	// usersync's shape and no mark: Migrate marks the database.
	ownOlder
)

// decideOwnership judges a survey. It returns an error wrapping
// models.ErrForeignData for a database whose usersync-named collections
// hold another program's documents or indexes and no mark, and one for a
// database marked by a newer usersync.
func decideOwnership(sv survey) (ownership, error) {
	if m := sv.mark; m != nil {
		if m.Schema > schemaVersion {
			return 0, fmt.Errorf("database %q was prepared by a newer usersync (schema %d; this one knows %d): run that version or a newer one",
				sv.db, m.Schema, schemaVersion)
		}
		// The billing collections are newer than the mark's schema 3: a
		// database an earlier version marked may hold an application's
		// collection of one of their names, which usersync must not
		// adopt.
		for _, base := range billingCollections {
			if c, ok := sv.colls[base]; ok {
				if reason := foreignCollection(base, c); reason != "" {
					return 0, fmt.Errorf("database %q (MONGODB_DATABASE) holds a collection %q that usersync did not write (%s), "+
						"where this version keeps Clerk Billing: rename or move that collection, or give usersync a database of its own "+
						"or USERSYNC_COLLECTION_PREFIX names of its own, its data moved there; nothing was changed: %w", sv.db, sv.prefix+base, reason, models.ErrForeignData)
				}
			}
		}
		if m.Schema < schemaVersion {
			return ownOlder, nil
		}
		return ownMarked, nil
	}
	populated, recorded := "", false
	for _, base := range ownedCollections {
		c, ok := sv.colls[base]
		if !ok {
			continue
		}
		if reason := foreignCollection(base, c); reason != "" {
			return 0, foreignData(sv, base, reason)
		}
		if len(c.sample) > 0 {
			populated = cmp.Or(populated, base)
			recorded = recorded || slices.Contains(records, base)
		}
	}
	switch {
	case populated == "":
		return ownFresh, nil
	case !recorded && !sv.legacyMark:
		return 0, foreignData(sv, populated, "its documents look like usersync's, but the database has none of usersync's own records "+
			"(its event log, counters or mark)")
	}
	// Data of an older usersync, marked by an earlier version
	// (legacyMark: schema 2) or not at all.
	return ownOlder, nil
}

// foreignCollection says why the collection base, as surveyed, is not
// one usersync made or adopts, or "": a view or another kind of
// collection, a validator, an index usersync does not make, a document
// of another shape.
func foreignCollection(base string, c collSurvey) string {
	switch {
	case c.kind != "" && c.kind != "collection":
		return "it is a " + c.kind + ", not a collection"
	case c.validator:
		return "it has a validator, which usersync does not set"
	}
	if reason := foreignIndexes(base, c.indexes); reason != "" {
		return reason
	}
	for _, doc := range c.sample {
		if reason := foreignShape(base, doc); reason != "" {
			return reason
		}
	}
	return ""
}

func foreignData(sv survey, base, reason string) error {
	name := sv.prefix + base
	return fmt.Errorf("database %q (MONGODB_DATABASE) holds a collection %q that usersync did not write (%s), and no mark of usersync's: "+
		"usersync needs a database of its own; set MONGODB_DATABASE to one (usersync creates it), or, where a database must be shared, "+
		"USERSYNC_COLLECTION_PREFIX to give usersync's collections names of their own; nothing was changed: %w",
		sv.db, name, reason, models.ErrForeignData)
}

// foreignShape says why doc, of the collection base, is not a document
// usersync writes, or "" when it is one. The shapes are those every
// usersync version wrote.
func foreignShape(base string, doc bson.Raw) string {
	str := func(key string) (string, bool) { return doc.Lookup(key).StringValueOK() }
	date := func(key string) bool { _, ok := doc.Lookup(key).DateTimeOK(); return ok }
	switch base {
	case UsersCollection, rekeyCollection:
		if id, ok := str("userId"); !ok || id == "" {
			return "a document has no userId"
		}
		if !date("sourceUpdatedAt") {
			return "a document has no sourceUpdatedAt date"
		}
	case EventsCollection:
		if st, _ := str("status"); !slices.Contains([]string{string(models.StatusStored), string(models.StatusProcessed), string(models.StatusFailed), string(models.StatusDiscarded)}, st) {
			return "a document has no status usersync sets"
		}
		if v, err := doc.LookupErr("eventId"); err == nil && v.Type != bson.TypeString {
			return "a document's eventId is not a string"
		}
		if !date("receivedAt") {
			return "a document has no receivedAt date"
		}
	case OrganizationsCollection:
		if id, ok := str("organizationId"); !ok || id == "" || !date("sourceUpdatedAt") {
			return "a document is not one of usersync's organizations"
		}
	case MembershipsCollection:
		if id, ok := str("membershipId"); !ok || id == "" || !date("sourceUpdatedAt") {
			return "a document is not one of usersync's memberships"
		}
	case InvitationsCollection:
		if id, ok := str("invitationId"); !ok || id == "" || !date("sourceUpdatedAt") {
			return "a document is not one of usersync's invitations"
		}
	case SubscriptionsCollection, SubscriptionItemsCollection, PaymentAttemptsCollection:
		key := map[string]string{SubscriptionsCollection: "subscriptionId", SubscriptionItemsCollection: "itemId",
			PaymentAttemptsCollection: "attemptId"}[base]
		if id, ok := str(key); !ok || id == "" || !date("sourceUpdatedAt") {
			return "a document is not one of usersync's " + strings.ReplaceAll(base, "_", " ")
		}
	case BillingPlansCollection:
		if id, ok := str("payerId"); !ok || id == "" || !date("updatedAt") {
			return "a document is not one of usersync's billing plans"
		}
	case EndpointsCollection:
		if _, ok := str("url"); !ok || !date("createdAt") {
			return "a document is not one of usersync's outbound endpoints"
		}
	case DeliveriesCollection:
		if id, ok := str("endpointId"); !ok || id == "" || !date("nextAt") {
			return "a document is not one of usersync's outbound deliveries"
		}
	case DeliveryAttemptsCollection:
		if _, ok := str("messageId"); !ok || !date("at") {
			return "a document is not one of usersync's outbound delivery attempts"
		}
	case CountersCollection:
		if id, _ := str("_id"); !strings.HasPrefix(id, outcomePrefix) && !strings.HasPrefix(id, "migration:") {
			return "a document is not one of usersync's counters"
		}
	case LeasesCollection:
		if _, ok := str("owner"); !ok || !date("expiresAt") {
			return "a document is not one of usersync's leases"
		}
	case MetaCollection:
		if id, _ := str("_id"); id != markID {
			return "a document is not usersync's mark"
		}
	case ActivityCollection:
		if id, _ := str("_id"); (!strings.HasPrefix(id, "m:") && !strings.HasPrefix(id, "h:")) || !date("start") {
			return "a document is not one of usersync's activity buckets"
		}
	case RunsCollection:
		if _, ok := str("kind"); !ok || !date("startedAt") {
			return "a document is not one of usersync's run summaries"
		}
	}
	return ""
}

// knownIndexNames are the indexes any usersync version made.
var knownIndexNames = func() []string {
	names := []string{"_id_"}
	for _, ms := range [][]mongo.IndexModel{userIndexes, eventIndexes, orgIndexes, membershipIndexes, invitationIndexes, subIndexes, itemIndexes, attemptIndexes,
		planIndexes, deliveryIndexes, deliveryAttemptIndexes} {
		for _, m := range ms {
			names = append(names, indexName(m.Keys.(bson.D)))
		}
	}
	return append(append(names, obsoleteUserIndexes...), obsoleteEventIndexes...)
}()

// foreignIndexes says why the indexes of the collection base are not
// usersync's, or "": an index usersync never made, or one of its names
// with other unique or sparse options.
func foreignIndexes(base string, specs []indexSpec) string {
	for _, sp := range specs {
		if !slices.Contains(knownIndexNames, sp.Name) {
			return fmt.Sprintf("an index %s that usersync does not make", sp.Name)
		}
		for _, r := range uniqueRules {
			if r.base == base && r.index == sp.Name && (!sp.Unique || sp.Partial) {
				return fmt.Sprintf("its index %s is not unique as usersync makes it", sp.Name)
			}
		}
	}
	return ""
}

// survey reads what decideOwnership judges, writing nothing.
func (s *Store) survey(ctx context.Context) (survey, error) {
	sv := survey{db: s.db.Name(), prefix: s.names.prefix, colls: map[string]collSurvey{}}
	specs, err := s.db.ListCollectionSpecifications(ctx, bson.D{})
	if err != nil {
		return sv, fmt.Errorf("list collections: %w", translate(err))
	}
	primary := options.Collection().SetReadPreference(readpref.Primary())
	for _, base := range ownedCollections {
		i := slices.IndexFunc(specs, func(sp mongo.CollectionSpecification) bool { return sp.Name == s.names.of(base) })
		if i < 0 {
			continue
		}
		coll := s.db.Collection(s.names.of(base), primary)
		c := collSurvey{kind: specs[i].Type, validator: hasValidator(specs[i].Options)}
		cur, err := coll.Find(ctx, bson.D{}, options.Find().SetLimit(surveySample))
		if err != nil {
			return sv, fmt.Errorf("read %s: %w", coll.Name(), translate(err))
		}
		for cur.Next(ctx) {
			c.sample = append(c.sample, slices.Clone(cur.Current))
		}
		err = cur.Err()
		cur.Close(ctx)
		if err != nil {
			return sv, fmt.Errorf("read %s: %w", coll.Name(), translate(err))
		}
		if c.indexes, err = listIndexes(ctx, coll); err != nil {
			return sv, err
		}
		sv.colls[base] = c
	}
	if c, ok := sv.colls[MetaCollection]; ok {
		for _, raw := range c.sample {
			var m markDoc
			if id, _ := raw.Lookup("_id").StringValueOK(); id == markID && bson.Unmarshal(raw, &m) == nil {
				sv.mark = &m
			}
		}
	}
	if _, ok := sv.colls[CountersCollection]; ok {
		err := s.db.Collection(s.names.of(CountersCollection), primary).FindOne(ctx, bson.D{{Key: "_id", Value: legacySchemaMark}}).Err()
		switch err = translate(err); {
		case err == nil:
			sv.legacyMark = true
		case !errors.Is(err, models.ErrNotFound):
			return sv, fmt.Errorf("read migration mark: %w", err)
		}
	}
	return sv, nil
}

// hasValidator reports whether a collection's options (listCollections'
// options) set a validator: a non-empty validator document.
func hasValidator(opts bson.Raw) bool {
	v, err := opts.LookupErr("validator")
	if err != nil {
		return false
	}
	doc, ok := v.DocumentOK()
	if !ok {
		return true // not a document: not usersync's either
	}
	elems, _ := doc.Elements()
	return len(elems) > 0
}

func listIndexes(ctx context.Context, coll *mongo.Collection) ([]indexSpec, error) {
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list indexes of %s: %w", coll.Name(), translate(err))
	}
	defer cur.Close(ctx)
	var specs []indexSpec
	for cur.Next(ctx) {
		specs = append(specs, parseIndexSpec(cur.Current))
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("list indexes of %s: %w", coll.Name(), translate(err))
	}
	return specs, nil
}

// writeMark marks the database as usersync's, at schemaVersion. Of
// concurrent upserts of one new document, the DocumentDB engines let one
// through and answer the others with a duplicate key (mongod retries them
// itself): an instance that lost that race writes again, onto the mark
// the other made.
func (s *Store) writeMark(ctx context.Context, now time.Time) error {
	var err error
	for try := 0; try < 2; try++ {
		_, err = s.db.Collection(s.names.of(MetaCollection)).UpdateOne(ctx, bson.D{{Key: "_id", Value: markID}},
			bson.D{
				{Key: "$set", Value: bson.D{{Key: "schema", Value: schemaVersion}}},
				{Key: "$setOnInsert", Value: bson.D{{Key: "createdAt", Value: now.UTC()}}},
			}, options.UpdateOne().SetUpsert(true))
		if err = translate(err); !errors.Is(err, errDuplicate) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("mark the database as usersync's: %w", err)
	}
	return nil
}
