package mongo_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/repository/mongo"
)

// A query plan is judged by what it reads, in the two formats explain
// answers in:
//   - MongoDB: queryPlanner.winningPlan, a tree of stages. A COLLSCAN
//     reads the whole collection; a SORT sorts in memory what the stages
//     below it found, however many.
//   - DocumentDB (FerretDB 2, Cosmos DB vCore): queryPlanner.Plan, the
//     PostgreSQL plan of the SQL the query became (Node Type, Index Name,
//     Index Cond, Recheck Cond, Sort Key, Plans). A collection is one table
//     whose every row has the collection's shard_key_value: a Seq Scan, or
//     an index scan whose only condition is shard_key_value = …, reads
//     the whole collection. DocumentDB 0.106 returned no query in index
//     order (every sorted query of the recorded answers has a Sort node),
//     so a Sort is judged by what it sorts: every match of the scans
//     below it, fine when a condition bounds them (see boundedScan),
//     a collection's worth when none does.

// planProblem is one kind of thing a plan does that a query must not.
type planProblem string

const (
	readsWholeCollection planProblem = "reads the whole collection"
	sortsUnbounded       planProblem = "sorts in memory every match of a condition that does not bound them"
)

// planError lists what is wrong with a plan.
type planError struct {
	problems []planProblem
	details  []string
}

func (e *planError) Error() string { return strings.Join(e.details, "; ") }

func (e *planError) add(p planProblem, detail string) {
	if !slices.Contains(e.problems, p) {
		e.problems = append(e.problems, p)
	}
	e.details = append(e.details, fmt.Sprintf("%s: %s", p, detail))
}

// planProblems returns the kinds of problem err (from checkPlan) reports,
// in alphabetical order.
func planProblems(err error) []planProblem {
	if pe, ok := err.(*planError); ok {
		return slices.Sorted(slices.Values(pe.problems))
	}
	return nil
}

// checkPlan judges the answer raw of an explain (verbosity queryPlanner)
// in either format. It returns a *planError listing what the plan does
// wrong, nil for a plan that reads only what an index bounds, and another
// error for an answer in neither format.
func checkPlan(raw bson.Raw) error {
	if wp, err := raw.LookupErr("queryPlanner", "winningPlan"); err == nil {
		return checkMongoDBPlan(wp)
	}
	if p, err := raw.LookupErr("queryPlanner", "Plan"); err == nil {
		doc, ok := p.DocumentOK()
		if !ok {
			return fmt.Errorf("queryPlanner.Plan is a %s, not a PostgreSQL plan", p.Type)
		}
		var root pgNode
		if err := bson.Unmarshal(doc, &root); err != nil {
			return fmt.Errorf("read queryPlanner.Plan: %w", err)
		}
		return checkDocumentDBPlan(root)
	}
	return fmt.Errorf("no queryPlanner.winningPlan (MongoDB) or queryPlanner.Plan (DocumentDB) in %s", raw)
}

func checkMongoDBPlan(plan bson.RawValue) error {
	pe := &planError{}
	stages := planStages(plan)
	for _, st := range stages {
		switch st {
		case "COLLSCAN":
			pe.add(readsWholeCollection, strings.Join(stages, " ← "))
		case "SORT":
			pe.add(sortsUnbounded, strings.Join(stages, " ← "))
		}
	}
	if len(pe.problems) > 0 {
		return pe
	}
	return nil
}

// planStages lists the stages of an explained plan, root first, through
// the classic engine's inputStage(s), the slot-based engine's queryPlan,
// and a sharded cluster's shards.
func planStages(v bson.RawValue) []string {
	var out []string
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		doc := v.Document()
		if st, ok := doc.Lookup("stage").StringValueOK(); ok {
			out = append(out, st)
		}
		elems, _ := doc.Elements()
		for _, e := range elems {
			switch e.Key() {
			case "inputStage", "inputStages", "queryPlan", "shards", "winningPlan", "thenStage", "elseStage", "outerStage", "innerStage":
				out = append(out, planStages(e.Value())...)
			}
		}
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		for _, e := range vals {
			out = append(out, planStages(e)...)
		}
	}
	return out
}

// planIndexes lists the indexes an explained plan reads, in either
// format.
func planIndexes(raw bson.Raw) []string {
	var out []string
	var mongoWalk func(v bson.RawValue)
	mongoWalk = func(v bson.RawValue) {
		switch v.Type {
		case bson.TypeEmbeddedDocument:
			if name, ok := v.Document().Lookup("indexName").StringValueOK(); ok {
				out = append(out, name)
			}
			elems, _ := v.Document().Elements()
			for _, e := range elems {
				mongoWalk(e.Value())
			}
		case bson.TypeArray:
			vals, _ := v.Array().Values()
			for _, e := range vals {
				mongoWalk(e)
			}
		}
	}
	if wp, err := raw.LookupErr("queryPlanner", "winningPlan"); err == nil {
		mongoWalk(wp)
		return out
	}
	var root pgNode
	if p, err := raw.LookupErr("queryPlanner", "Plan"); err == nil && bson.Unmarshal(p.Value, &root) == nil {
		var walk func(n pgNode)
		walk = func(n pgNode) {
			if n.Index != "" {
				out = append(out, n.Index)
			}
			for _, c := range n.Plans {
				walk(c)
			}
		}
		walk(root)
	}
	return out
}

// pgNode is a node of a PostgreSQL plan, as DocumentDB's explain gives it.
type pgNode struct {
	Type        string   `bson:"Node Type"`
	Index       string   `bson:"Index Name"`
	IndexCond   string   `bson:"Index Cond"`
	RecheckCond string   `bson:"Recheck Cond"`
	SortKey     []string `bson:"Sort Key"`
	Plans       []pgNode `bson:"Plans"`
}

func (n pgNode) String() string {
	s := n.Type
	if n.Index != "" {
		s += " of " + n.Index
	}
	var conds []string
	for _, c := range parseConds(n.IndexCond) {
		conds = append(conds, c.String())
	}
	if len(conds) > 0 {
		s += " (" + strings.Join(conds, " and ") + ")"
	} else if strings.Contains(n.Type, "Scan") {
		s += " (no condition but the collection)"
	}
	return s
}

func checkDocumentDBPlan(root pgNode) error {
	pe := &planError{}
	var walk func(n pgNode, inBoundedAnd bool)
	walk = func(n pgNode, inBoundedAnd bool) {
		switch {
		case n.Type == "Seq Scan":
			pe.add(readsWholeCollection, n.String())
		case isIndexScan(n.Type) && len(parseConds(n.IndexCond)) == 0:
			pe.add(readsWholeCollection, n.String())
		case isIndexScan(n.Type) && onlyNulls(parseConds(n.IndexCond)) && !inBoundedAnd:
			// {field: null} through a sparse index: every document
			// without the field, which is nearly all of them (in an
			// intersection with a bounded scan, only those)
			pe.add(readsWholeCollection, n.String())
		case n.Type == "Sort":
			for _, c := range n.Plans {
				if !boundedScan(c) {
					pe.add(sortsUnbounded, "Sort above "+describe(c))
				}
			}
		}
		for _, c := range n.Plans {
			walk(c, n.Type == "BitmapAnd" && boundedScan(n))
		}
	}
	walk(root, false)
	if len(pe.problems) > 0 {
		return pe
	}
	return nil
}

// onlyNulls reports whether every condition of conds is an equality to
// null (a missing field).
func onlyNulls(conds []pgCond) bool {
	for _, c := range conds {
		if c.op != "=" || c.value.Type != bson.TypeNull {
			return false
		}
	}
	return len(conds) > 0
}

func isIndexScan(t string) bool {
	return t == "Index Scan" || t == "Index Only Scan" || t == "Bitmap Index Scan"
}

// describe names n and the scans under it.
func describe(n pgNode) string {
	if isIndexScan(n.Type) || n.Type == "Seq Scan" || len(n.Plans) == 0 {
		return n.String()
	}
	var below []string
	for _, c := range n.Plans {
		below = append(below, describe(c))
	}
	return n.Type + " ← " + strings.Join(below, ", ")
}

// boundedScan reports whether the rows node n yields are bounded by a
// condition of an index scan, rather than by the size of the collection.
// An intersection (BitmapAnd) is bounded when one of its scans is;
// anything else when every scan under it is.
func boundedScan(n pgNode) bool {
	switch {
	case n.Type == "Seq Scan":
		return false
	case isIndexScan(n.Type):
		return bounding(parseConds(n.IndexCond))
	case n.Type == "BitmapAnd":
		return slices.ContainsFunc(n.Plans, boundedScan)
	case len(n.Plans) == 0:
		return false
	}
	for _, c := range n.Plans {
		if !boundedScan(c) {
			return false
		}
	}
	return true
}

// What bounds a scan, in usersync's data: these fields and values are
// facts of its collections, not of the engine.
var (
	// identifying fields: an equality finds one document, or the events
	// of one user or one object (a slug: one active organization; a
	// tombstone has none; a payer's subscription items or attempts, a
	// payment's attempts: a few each).
	identifyingFields = []string{"_id", "userId", "eventId", "email", "slug", "objectId", "membershipId", "payerId", "paymentId"}
	// backlogStatuses: events still to process, a backlog rather than
	// the history ("processed" is nearly every event).
	backlogStatuses = []string{"stored", "failed"}
	// sparseFewFields are indexed sparsely and set on few documents: the
	// events with retries left, the tombstones still to erase.
	sparseFewFields = []string{"retryAt", "eraseAfter"}
)

// bounding reports whether the index conditions conds bound a scan: an
// equality on an identifying field or on a backlog status, any condition
// on a sparse field of few documents, or a range closed at both ends (a
// window the caller chose). An equality on a field most documents share
// (status "processed", eventType), a range open at one end, or the
// collection alone does not.
func bounding(conds []pgCond) bool {
	lower, upper := map[string]bool{}, map[string]bool{}
	for _, c := range conds {
		switch {
		case c.op == "=" && slices.Contains(identifyingFields, c.field):
			return true
		case c.op == "=" && c.field == "status" && slices.Contains(backlogStatuses, c.value.StringValue()):
			return true
		case slices.Contains(sparseFewFields, c.field):
			return true
		case c.op == "<>": // DocumentDB's range: {min, max}
			if doc, ok := c.value.DocumentOK(); ok {
				_, minErr := doc.LookupErr("min")
				_, maxErr := doc.LookupErr("max")
				if minErr == nil && maxErr == nil {
					return true
				}
			}
		case c.op == ">" || c.op == ">=":
			lower[c.field] = true
		case c.op == "<" || c.op == "<=":
			upper[c.field] = true
		}
	}
	for f := range lower {
		if upper[f] {
			return true
		}
	}
	return false
}

// pgCond is one condition of an index scan on a document's field:
// "document OPERATOR(documentdb_api_catalog.@=) 'BSONHEX…'" (the BSON is
// {field: value}) or "object_id OPERATOR(documentdb_core.>) 'BSONHEX…'"
// (the _id; the BSON is {"": value}). The collection's own condition,
// shard_key_value = …, is not one.
type pgCond struct {
	field string
	op    string // =, <, <=, >, >=, <> (a range), without DocumentDB's @
	value bson.RawValue
}

func (c pgCond) String() string { return c.field + " " + c.op + " " + c.value.String() }

var condPattern = regexp.MustCompile(`(document|object_id) OPERATOR\([a-z_]+\.@?([^)]+)\) (?:'|ANY \('\{)BSONHEX([0-9a-fA-F]+)`)

func parseConds(s string) []pgCond {
	var conds []pgCond
	for _, m := range condPattern.FindAllStringSubmatch(s, -1) {
		b, err := hex.DecodeString(m[3])
		if err != nil {
			continue
		}
		elems, err := bson.Raw(b).Elements()
		if err != nil || len(elems) == 0 {
			continue
		}
		c := pgCond{field: elems[0].Key(), op: m[2], value: elems[0].Value()}
		if m[1] == "object_id" {
			c.field = "_id"
		}
		conds = append(conds, c)
	}
	return conds
}

// documentDBFixture is what the recorded DocumentDB answers
// (testdata/documentdb-explain-find.json, keyed by the explain test's
// names of the time) show for each query, under the name the explain
// test now gives it, and what checkPlan must say of it.
var documentDBFixture = []struct {
	key, query string
	want       []planProblem
	shows      string
}{
	{"users list {Email: IncludeDeleted:false After: Limit:50}", "users list: active",
		[]planProblem{readsWholeCollection, sortsUnbounded},
		"Limit ← Sort ← Bitmap Heap Scan ← Bitmap Index Scan of _id_ on the shard key alone: every user, sorted"},
	{"users list {Email: IncludeDeleted:false After:116b88f173007be5e05df2a8 Limit:50}", "users list: active, after a cursor",
		[]planProblem{sortsUnbounded},
		"Limit ← Sort ← Index Scan of _id_ with _id > cursor: every user after the cursor, sorted"},
	{"users list {Email: IncludeDeleted:true After: Limit:50}", "users list: all",
		[]planProblem{readsWholeCollection, sortsUnbounded},
		"Limit ← Sort ← Bitmap Index Scan of _id_ on the shard key alone"},
	{"users list {Email:a@example.com IncludeDeleted:false After: Limit:50}", "users list: active, by email", nil,
		"Bitmap Index Scan of email_1, email = …; no sort"},
	{"users list {Email:a@example.com IncludeDeleted:true After: Limit:50}", "users list: all, by email", nil,
		"Bitmap Index Scan of email_1; no sort"},
	{"change feed {Since:2026-11-24 03:30:41.558 +0000 UTC Until:2026-11-24 04:30:41.558 +0000 UTC After: Limit:50}", "change feed: window", nil,
		"Sort ← Index Scan of updatedAt_1__id_1 on the range [since, until]: the window's users, sorted"},
	{"change feed {Since:2026-11-24 03:30:41.558 +0000 UTC Until:2026-11-24 04:30:41.558 +0000 UTC After:1795494641558_116b88f173007be5e05df2a8 Limit:50}", "change feed: window, after a cursor", nil,
		"Sort ← Index Scan of updatedAt_1__id_1 on the range [cursor, until]"},
	{"user by _id (Get, Apply's state)", "user by _id (Get, Apply's state)", nil, "Index Scan of _id_, _id = …"},
	{"event by _id (Record's read, Get)", "event by _id (Record's read, Get)", nil, "Index Scan of _id_, _id = …"},
	{"event by eventId (Get)", "event by eventId (Get)", nil, "Bitmap Index Scan of eventId_1"},
	{"event log {Status: EventType: UserID: Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log",
		[]planProblem{readsWholeCollection, sortsUnbounded},
		"Limit ← Sort ← Bitmap Index Scan of _id_ on the shard key alone: every event, sorted"},
	{"event log {Status:processed EventType: UserID: Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log: status",
		[]planProblem{sortsUnbounded},
		"Sort ← Bitmap Index Scan of status_1_receivedAt_-1__id_-1, status = processed: nearly every event, sorted"},
	{"event log {Status: EventType:updated UserID: Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log: eventType",
		[]planProblem{sortsUnbounded},
		"Sort ← Bitmap Index Scan of eventType_1_receivedAt_-1__id_-1, eventType = updated: most events, sorted"},
	{"event log {Status: EventType: UserID:user_1 Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log: userId", nil,
		"Sort ← Bitmap Index Scan of userId_1_receivedAt_-1__id_-1, userId = …: one user's events, sorted"},
	{"event log {Status:failed EventType:created UserID: Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log: status and eventType", nil,
		"Sort ← BitmapAnd of eventType_1… and status_1… (failed): the failed events, sorted"},
	{"event log {Status:stored EventType:deleted UserID:user_1 Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log: userId, status and eventType", nil,
		"Sort ← BitmapAnd of userId_1… and eventType_1…: one user's events"},
	{"event log {Status: EventType: UserID: Since:2026-11-24 03:30:41.558 +0000 UTC Until:2026-11-24 04:30:41.558 +0000 UTC After: Limit:50}", "event log: window", nil,
		"Sort ← Index Scan of userId_1_receivedAt_-1__id_-1 on the range [since, until) of receivedAt: the window's events"},
	{"event log {Status:processed EventType: UserID: Since:2026-11-24 03:30:41.558 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After: Limit:50}", "event log: status, since",
		[]planProblem{sortsUnbounded},
		"Sort ← Index Scan of status_1_receivedAt_-1__id_-1, status = processed and receivedAt >= since: every processed event since, sorted"},
	{"event log {Status: EventType: UserID: Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After:1795494641558_116b88f173007be5e05df2a8 Limit:50}", "event log: after a cursor",
		[]planProblem{sortsUnbounded},
		"Sort ← Bitmap Index Scan of userId_1_receivedAt_-1__id_-1, receivedAt <= cursor: every older event, sorted (page 2 on)"},
	{"event log {Status: EventType: UserID:user_1 Since:0001-01-01 00:00:00 +0000 UTC Until:0001-01-01 00:00:00 +0000 UTC After:1795494641558_116b88f173007be5e05df2a8 Limit:50}", "event log: userId, after a cursor", nil,
		"Sort ← Index Scan of userId_1_receivedAt_-1__id_-1, userId = … and receivedAt <= cursor"},
	{"stats: stored", "stats: stored", nil, "Aggregate ← Bitmap Index Scan of status_1…, status = stored"},
	{"stats: failed", "stats: failed", nil, "Aggregate ← Bitmap Index Scan of status_1…, status = failed"},
	{"stats: gave up", "stats: gave up", nil, "Aggregate ← BitmapAnd of retryAt_1 (retryAt = null) and status_1… (failed)"},
	{"stats: outcome counters", "stats: outcome counters", nil, "Index Scan of _id_ on the range [outcome:, outcome;)"},
	{"sweep: stuck stored events", "sweep: stuck stored events", nil,
		"Sort ← Index Scan of status_1…, status = stored and receivedAt < …: the backlog, sorted"},
	{"sweep: failed events due", "sweep: failed events due", nil, "Sort ← Bitmap Index Scan of retryAt_1 (sparse), retryAt <= now"},
	{"retention: old processed events", "retention: old processed events", nil,
		"Bitmap Index Scan of processedAt_1, processedAt < cutoff; no sort (the bitmap holds every old event's entry)"},
	{"erasure: tombstones due", "erasure: tombstones due", nil, "Bitmap Index Scan of eraseAfter_1 (sparse)"},
	{"erasure: a deleted user's events", "erasure: a deleted user's events", nil, "Bitmap Index Scan of userId_1…, userId = …"},
	{"reconcile: walk of active users", "reconcile: walk of active users",
		[]planProblem{readsWholeCollection, sortsUnbounded},
		"Sort ← Bitmap Index Scan of _id_ on the shard key alone: every user (the walk reads them all anyway, but sorts them first)"},
}

// TestCheckPlan_JudgesEveryRecordedDocumentDBPlan runs the checker on
// every plan a DocumentDB engine answered: it flags the ones that read a
// whole collection or sort what no condition bounds, and passes the
// others. Every query it flags has a documented exception on DocumentDB
// (see documentDBExceptions), and no query it passes has one.
func TestCheckPlan_JudgesEveryRecordedDocumentDBPlan(t *testing.T) {
	b, err := os.ReadFile("testdata/documentdb-explain-find.json")
	if err != nil {
		t.Fatal(err)
	}
	var answers map[string]bson.Raw
	if err := bson.UnmarshalExtJSON(b, false, &answers); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, q := range documentDBFixture {
		t.Run(q.query, func(t *testing.T) {
			raw, ok := answers[q.key]
			if !ok {
				t.Fatalf("no recorded answer %q", q.key)
			}
			seen[q.key] = true
			err := checkPlan(raw)
			if _, isPlan := err.(*planError); err != nil && !isPlan {
				t.Fatalf("checkPlan: %v", err)
			}
			if got := planProblems(err); !slices.Equal(got, q.want) {
				t.Errorf("checkPlan = %v (%v), want %v; the recorded plan: %s", got, err, q.want, q.shows)
			}
			if _, excepted := documentDBExceptions[q.query]; len(q.want) > 0 && !excepted && !sentInWindows[q.query] {
				t.Errorf("flagged %v, but neither a documented exception on DocumentDB nor a query sent only in windows", q.want)
			}
		})
	}
	for key := range answers {
		if !seen[key] {
			t.Errorf("recorded answer %q is not judged", key)
		}
	}
}

// TestCheckPlan_JudgesMongoDBPlans runs the checker on MongoDB plans as
// explain gives them: the classic engine's, the slot-based engine's, a
// sharded cluster's, a count's and an update's.
func TestCheckPlan_JudgesMongoDBPlans(t *testing.T) {
	for _, tc := range []struct {
		name, plan string
		want       []planProblem
	}{
		{"index scan", `{"stage":"LIMIT","inputStage":{"stage":"FETCH","inputStage":{"stage":"IXSCAN","indexName":"status_1_receivedAt_-1__id_-1","direction":"forward"}}}`, nil},
		{"by _id", `{"stage":"IDHACK"}`, nil},
		{"by _id, 8.0", `{"stage":"EXPRESS_IXSCAN","keyPattern":"{ _id: 1 }"}`, nil},
		{"count", `{"stage":"COUNT","inputStage":{"stage":"COUNT_SCAN","indexName":"status_1_receivedAt_-1__id_-1"}}`, nil},
		{"update", `{"stage":"UPDATE","inputStage":{"stage":"FETCH","inputStage":{"stage":"IXSCAN","indexName":"_id_"}}}`, nil},
		{"empty collection", `{"stage":"EOF"}`, nil},
		{"sort merge of two index scans", `{"stage":"SORT_MERGE","inputStages":[{"stage":"IXSCAN"},{"stage":"IXSCAN"}]}`, nil},
		{"collection scan", `{"stage":"LIMIT","inputStage":{"stage":"COLLSCAN","direction":"forward"}}`, []planProblem{readsWholeCollection}},
		{"sort in memory", `{"stage":"SORT","sortPattern":{"receivedAt":-1},"inputStage":{"stage":"FETCH","inputStage":{"stage":"IXSCAN","indexName":"eventType_1"}}}`, []planProblem{sortsUnbounded}},
		{"slot-based", `{"queryPlan":{"stage":"SORT","inputStage":{"stage":"COLLSCAN"}},"slotBasedPlan":{"stages":"[1] scan"}}`, []planProblem{readsWholeCollection, sortsUnbounded}},
		{"sharded", `{"stage":"SHARD_MERGE","shards":[{"shardName":"a","winningPlan":{"stage":"FETCH","inputStage":{"stage":"IXSCAN"}}},{"shardName":"b","winningPlan":{"stage":"COLLSCAN"}}]}`, []planProblem{readsWholeCollection}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := rawDoc(t, `{"queryPlanner":{"winningPlan":`+tc.plan+`},"ok":1}`)
			err := checkPlan(raw)
			if got := planProblems(err); !slices.Equal(got, tc.want) {
				t.Errorf("checkPlan = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
	for _, raw := range []string{`{"ok":1}`, `{"queryPlanner":{"Plan":["id=2 parent=0 notused=0 detail=SCAN users_5e7cc513"]}}`} {
		if err := checkPlan(rawDoc(t, raw)); err == nil || planProblems(err) != nil {
			t.Errorf("checkPlan(%s) = %v, want an error saying it knows no such plan", raw, err)
		}
	}
}

func TestPlanStages_ReadsClassicAndSlotBasedPlans(t *testing.T) {
	doc := func(s string) bson.RawValue {
		var d bson.D
		if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
			t.Fatal(err)
		}
		b, _ := bson.Marshal(bson.D{{Key: "p", Value: d}})
		return bson.Raw(b).Lookup("p")
	}
	for _, tc := range []struct{ name, plan, want string }{
		{"classic", `{"stage":"LIMIT","inputStage":{"stage":"FETCH","inputStage":{"stage":"IXSCAN","indexName":"status_1"}}}`, "LIMIT FETCH IXSCAN"},
		{"slot-based", `{"queryPlan":{"stage":"SORT","inputStage":{"stage":"COLLSCAN"}},"slotBasedPlan":{"stages":"[1] scan"}}`, "SORT COLLSCAN"},
		{"or", `{"stage":"SORT_MERGE","inputStages":[{"stage":"IXSCAN"},{"stage":"IXSCAN"}]}`, "SORT_MERGE IXSCAN IXSCAN"},
		{"sharded", `{"stage":"SHARD_MERGE","shards":[{"shardName":"a","winningPlan":{"stage":"COLLSCAN"}}]}`, "SHARD_MERGE COLLSCAN"},
	} {
		if got := strings.Join(planStages(doc(tc.plan)), " "); got != tc.want {
			t.Errorf("%s: stages %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckPlan_JudgesPagesOfOrganizationsAndMemberships runs the checker
// on DocumentDB plans of the shape the recorded pages of users have
// (Limit ← Sort ← Index Scan), with the conditions of the pages of
// organizations and memberships: the whole range of an organization's
// memberships is an exception, a window of it is bounded, and so is a
// page by slug (a slug is one active organization's).
func TestCheckPlan_JudgesPagesOfOrganizationsAndMemberships(t *testing.T) {
	cursor, lo, hi := mongo.DocIDForTest("orgmem_a"), mongo.DocIDForTest("orgmem_b"), mongo.DocIDForTest("orgmem_c")
	doc := func(op, field string, v any) string {
		b, err := bson.Marshal(bson.D{{Key: field, Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("(document OPERATOR(documentdb_api_catalog.@%s) 'BSONHEX%x'::documentdb_core.bson)", op, b)
	}
	id := func(op string, v bson.ObjectID) string {
		b, err := bson.Marshal(bson.D{{Key: "", Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("(object_id OPERATOR(documentdb_core.%s) 'BSONHEX%x'::documentdb_core.bson)", op, b)
	}
	const shard = "(shard_key_value = '74'::bigint)"
	page := func(index string, conds ...string) pgNode {
		scan := pgNode{Type: "Index Scan", Index: index, IndexCond: "(" + strings.Join(conds, " AND ") + ")"}
		return pgNode{Type: "Limit", Plans: []pgNode{{Type: "Sort", SortKey: []string{"_id"}, Plans: []pgNode{scan}}}}
	}
	for _, tc := range []struct {
		name string
		plan pgNode
		want []planProblem
	}{
		{"organizations list: active", page("_id_", shard), []planProblem{readsWholeCollection, sortsUnbounded}},
		{"organizations list: active, a window of _id", page("_id_", shard, id(">=", lo), id("<", hi)), nil},
		{"organizations list: all, after a cursor", page("_id_", shard, id(">", cursor)), []planProblem{sortsUnbounded}},
		{"organizations list: all, after a cursor, a window of _id", page("_id_", shard, id(">", cursor), id(">=", lo), id("<", hi)), nil},
		{"organizations list: by slug", page("slug_1__id_1", shard, doc("=", "slug", "acme")), nil},
		{"memberships of an organization: active", page("organizationId_1__id_1", shard, doc("=", "organizationId", "org_1"), doc(">", "_id", cursor)),
			[]planProblem{sortsUnbounded}},
		{"memberships of an organization: active, a window of _id", page("organizationId_1__id_1", shard, doc("=", "organizationId", "org_1"),
			doc(">", "_id", cursor), doc(">=", "_id", lo), doc("<", "_id", hi)), nil},
		{"memberships of a user: active", page("userId_1__id_1", shard, doc("=", "userId", "user_1"), doc(">", "_id", cursor)), nil},
		// as the engine answered the join of a page's members ({_id: {$in: […]}})
		{"members of a page (join)", pgNode{Type: "Index Scan", Index: "_id_", IndexCond: "(" + shard +
			" AND (object_id OPERATOR(documentdb_core.=) ANY ('{BSONHEX1300000007006b08bb9b56980f92a44ef26400,BSONHEX1300000007006b08bb9b56980f92a44ef26500}'::documentdb_core.bson[])))"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkDocumentDBPlan(tc.plan)
			if got := planProblems(err); !slices.Equal(got, tc.want) {
				t.Errorf("checkPlan = %v (%v), want %v", got, err, tc.want)
			}
			if _, excepted := documentDBExceptions[tc.name]; len(tc.want) > 0 && !excepted && !sentInWindows[tc.name] {
				t.Errorf("flagged %v, but neither a documented exception on DocumentDB nor a query sent only in windows", tc.want)
			}
		})
	}
}

// TestCheckPlan_ANullConditionOnASparseIndexReadsTheCollection: as the
// engine answered retention's search when it said {uncounted: null}, a
// scan of the sparse uncounted_1 index for every event without the field
// (2 s at 270k events): flagged, where the processedAt range is not.
func TestCheckPlan_ANullConditionOnASparseIndexReadsTheCollection(t *testing.T) {
	null := pgNode{Type: "Limit", Plans: []pgNode{{Type: "Index Scan", Index: "uncounted_1",
		IndexCond: "(document OPERATOR(documentdb_api_catalog.@=) 'BSONHEX100000000a756e636f756e7465640000'::documentdb_core.bson)"}}}
	if got := planProblems(checkDocumentDBPlan(null)); !slices.Equal(got, []planProblem{readsWholeCollection}) {
		t.Errorf("{uncounted: null} through uncounted_1: %v, want it to read the whole collection", got)
	}
	byTime := pgNode{Type: "Limit", Plans: []pgNode{{Type: "Index Scan", Index: "processedAt_1",
		IndexCond: "(document OPERATOR(documentdb_api_catalog.@<) 'BSONHEX1a0000000970726f6365737365644174000020031a9401000000'::documentdb_core.bson)"}}}
	if err := checkDocumentDBPlan(byTime); err != nil {
		t.Errorf("processedAt < cutoff: %v, want no problem", err)
	}
}
