package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestUpgrade_ASchema3FileGainsKindsAndMembershipErasure opens a file of
// schema 3, with events of every kind and a deleted membership, and checks
// that schema 4 files its events by kind and object and schedules the
// deleted membership's events for erasure.
func TestUpgrade_ASchema3FileGainsKindsAndMembershipErasure(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := fileAtSchema(t, dir, 3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for _, q := range []string{
		`INSERT INTO memberships (membership_id, org_id, user_id, permissions, metadata, created_at, updated_at,
			deleted_at, source_updated_at, last_event_id) VALUES
			('orgmem_gone', 'org_1', 'user_1', '[]', '{}', 1, 1, 1000, 1, 'msg_3'),
			('orgmem_here', 'org_1', 'user_2', '[]', '{}', 1, 1, NULL, 1, 'msg_4')`,
		`INSERT INTO events (event_id, type, event_type, user_id, object_id, raw_body, source, signature,
			received_at, processed_at, status, outcome) VALUES
			('msg_1', 'user.created', 'created', 'user_1', NULL, CAST('{}' AS BLOB), 'clerk', '', 1, 1, 'processed', 'applied'),
			('msg_2', 'organization.created', 'created', NULL, 'org_1', CAST('{}' AS BLOB), 'clerk', '', 2, 2, 'processed', 'applied'),
			('msg_3', 'organizationMembership.deleted', 'deleted', 'user_1', 'orgmem_gone', CAST('{"first_name":"Ada"}' AS BLOB), 'clerk', '', 3, 3, 'processed', 'applied'),
			('msg_4', 'organizationMembership.created', 'created', 'user_2', 'orgmem_here', CAST('{"first_name":"Bo"}' AS BLOB), 'clerk', '', 4, 4, 'processed', 'applied')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, c := range []struct {
		f    models.EventFilter
		want []string
	}{
		{models.EventFilter{Kind: models.KindMembership}, []string{"msg_4", "msg_3"}},
		{models.EventFilter{Kind: models.KindOrganization, EventType: models.EventCreated}, []string{"msg_2"}},
		{models.EventFilter{Kind: models.KindUser}, []string{"msg_1"}},
		{models.EventFilter{ObjectID: "orgmem_gone"}, []string{"msg_3"}},
	} {
		c.f.Limit = 10
		page, err := s.Events().List(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range page.Events {
			got = append(got, ev.EventID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) after the upgrade = %v, want %v", c.f, got, c.want)
		}
	}
	res, err := s.EraseDeletedBefore(ctx, time.UnixMilli(at), time.UnixMilli(at))
	if err != nil || res.Memberships != 1 || res.Events != 1 {
		t.Errorf("erasure after the upgrade = %+v, %v; want the deleted membership's one event", res, err)
	}
	for id, wantBody := range map[string]bool{"msg_3": false, "msg_4": true} {
		ev, err := s.Events().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if (len(ev.RawBody) > 0) != wantBody {
			t.Errorf("event %s after the erasure: body %q", id, ev.RawBody)
		}
	}
}

// TestUpgrade_ASchema5FileRecomputesEmailsFromTheLastPayloads opens a file
// of schema 5 whose emails were folded the Unicode way (a look-alike
// written with the Kelvin sign took "kate@example.com" from its owner) and
// checks that schema 6 recomputes every active user's email from its last
// applied payload, the newest claim of an email winning it.
func TestUpgrade_ASchema5FileRecomputesEmailsFromTheLastPayloads(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := fileAtSchema(t, dir, 5)
	payload := func(user, email string) string {
		return `{"type":"user.updated","data":{"id":"` + user + `","primary_email_address_id":"idn_2",` +
			`"email_addresses":[{"id":"idn_1","email_address":"other@example.com"},{"id":"idn_2","email_address":"` + email + `"}]}}`
	}
	users := []struct {
		id, stored, body string // body "": erased
		source           int64
		want             string
	}{
		// The owner lost its email to the look-alike's newer state.
		{"user_owner", "", payload("user_owner", " Kate@Example.com"), 1000, "kate@example.com"},
		{"user_kelvin", "kate@example.com", payload("user_kelvin", "\u212Aate@example.com"), 2000, "\u212Aate@example.com"},
		// A swap half done: the newer state keeps the email it holds.
		{"user_old", "", payload("user_old", "x@example.com"), 1000, ""},
		{"user_new", "x@example.com", payload("user_new", "X@example.com"), 2000, "x@example.com"},
		// An older look-alike never held the email: the holder keeps it.
		{"user_holder", "istanbul@example.com", payload("user_holder", "istanbul@example.com"), 3000, "istanbul@example.com"},
		{"user_dotted", "", payload("user_dotted", "\u0130stanbul@example.com"), 1000, "\u0130stanbul@example.com"},
		// No body to read: the email stays.
		{"user_erased", "kept@example.com", "", 1000, "kept@example.com"},
	}
	for i, u := range users {
		event := fmt.Sprintf("msg_%d", i)
		var email, body any
		if u.stored != "" {
			email = u.stored
		}
		if u.body != "" {
			body = []byte(u.body)
		}
		if _, err := db.Exec(`INSERT INTO users (user_id, email, display_name, metadata, created_at, updated_at,
			source_updated_at, last_event_id) VALUES (?, ?, ?, '{}', 1, 1, ?, ?)`, u.id, email, u.id, u.source, event); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO events (event_id, type, event_type, user_id, raw_body, source, signature,
			received_at, processed_at, status, outcome) VALUES (?, 'user.updated', 'updated', ?, ?, 'clerk', '', 1, 1,
			'processed', 'applied')`, event, u.id, body); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	for _, u := range users {
		got, err := s.Users().Get(ctx, u.id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Email != u.want {
			t.Errorf("%s after the upgrade: email %q, want %q", u.id, got.Email, u.want)
		}
		if changed := got.UpdatedAt.UnixMilli() != 1; changed != (u.stored != u.want) {
			t.Errorf("%s after the upgrade: updatedAt %v; want it moved only when the email changed", u.id, got.UpdatedAt)
		}
	}
}

// TestUpgrade_StoredUsersGetClerksCreationTimeFromTheirLastAppliedPayload
// opens a file of schema 5 whose users were written before usersync kept
// Clerk's created_at, and checks that the upgrade fills it from the
// payload of the event that produced each user's state, as applying that
// payload again would: milliseconds or seconds; nothing for a payload
// without one, an erased or unreadable body, or a tombstone.
func TestUpgrade_StoredUsersGetClerksCreationTimeFromTheirLastAppliedPayload(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := fileAtSchema(t, dir, 5)
	users := []struct{ id, event, body string }{
		{"user_ms", "msg_ms", `{"type":"user.updated","data":{"id":"user_ms","created_at":1654012591514,"updated_at":1654012591835}}`},
		{"user_s", "msg_s", `{"type":"user.updated","data":{"id":"user_s","created_at":1654012591,"updated_at":1654012591835}}`},
		{"user_none", "msg_none", `{"type":"user.updated","data":{"id":"user_none","updated_at":1654012591835}}`},
		{"user_str", "msg_str", `{"type":"user.updated","data":{"id":"user_str","created_at":"yesterday","updated_at":1654012591835}}`},
		{"user_erased", "msg_erased", ""},
		{"user_binary", "msg_binary", "\xff\xfe not json"},
		{"user_backfill", "backfill_user_backfill_1654012591835", `{"object":"event","type":"user.updated","timestamp":1654012591835,"data":{"id":"user_backfill","created_at":1600000000000}}`},
		{"user_gone", "msg_gone", `{"type":"user.updated","data":{"id":"user_gone","created_at":1654012591514}}`},
		{"user_no_event", "msg_missing", ""},
	}
	for i, u := range users {
		deleted := any(nil)
		if u.id == "user_gone" {
			deleted = 2000
		}
		if _, err := db.Exec(`INSERT INTO users (user_id, display_name, metadata, created_at, updated_at, deleted_at,
			source_updated_at, last_event_id) VALUES (?, ?, '{}', 1, 1, ?, 1, ?)`, u.id, u.id, deleted, u.event); err != nil {
			t.Fatal(err)
		}
		if u.id == "user_no_event" {
			continue
		}
		body := any([]byte(u.body))
		if u.body == "" {
			body = nil
		}
		if _, err := db.Exec(`INSERT INTO events (event_id, type, event_type, user_id, raw_body, source, signature,
			received_at, processed_at, status, outcome) VALUES (?, 'user.updated', 'updated', ?, ?, 'clerk', '', ?, ?, 'processed', 'applied')`,
			u.event, u.id, body, i, i); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	want := map[string]int64{"user_ms": 1654012591514, "user_s": 1654012591000, "user_backfill": 1600000000000}
	for _, u := range users {
		got, err := s.Users().Get(ctx, u.id)
		if err != nil {
			t.Fatal(err)
		}
		switch ms, ok := want[u.id]; {
		case ok && (got.SourceCreatedAt == nil || got.SourceCreatedAt.UnixMilli() != ms):
			t.Errorf("%s after the upgrade: sourceCreatedAt %v, want %v", u.id, got.SourceCreatedAt, time.UnixMilli(ms).UTC())
		case !ok && got.SourceCreatedAt != nil:
			t.Errorf("%s after the upgrade: sourceCreatedAt %v, want none", u.id, got.SourceCreatedAt)
		}
		if !got.CreatedAt.Equal(time.UnixMilli(1)) {
			t.Errorf("%s after the upgrade: createdAt %v, want usersync's as it was", u.id, got.CreatedAt)
		}
	}
}

// fileAtSchema makes the store file in dir at schema n, as a version whose
// last migration was the n-th left it, and returns it open.
func fileAtSchema(t *testing.T, dir string, n int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	slices.Sort(names)
	for i, name := range names[:n] {
		body, _ := migrations.ReadFile(name)
		if err := migrate(context.Background(), db, string(body), i+1); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// TestUpgrade_ASchema8FileGainsTheBillingTables opens a file of schema 8,
// with a user and its events, and checks that schema 9 adds the billing
// tables beside them: the user stays, and a billing event delivered after
// the upgrade is applied, its payer's plan computed.
func TestUpgrade_ASchema8FileGainsTheBillingTables(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := fileAtSchema(t, dir, 8)
	for _, q := range []string{
		`INSERT INTO users (user_id, display_name, metadata, created_at, updated_at, source_updated_at, last_event_id)
			VALUES ('user_1', 'user_1', '{}', 1, 1, 1, 'msg_1')`,
		`INSERT INTO events (event_id, type, kind, event_type, user_id, raw_body, source, signature, received_at,
			processed_at, status, outcome) VALUES ('msg_1', 'user.created', 'user', 'created', 'user_1', CAST('{}' AS BLOB),
			'clerk', '', 1, 1, 'processed', 'applied')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN
		('subscriptions', 'subscription_items', 'payment_attempts', 'billing_plans')`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("a schema 8 file has %d billing tables (%v), want none", tables, err)
	}
	db.Close()

	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if err := s.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN
		('subscriptions', 'subscription_items', 'payment_attempts', 'billing_plans')`).Scan(&tables); err != nil || tables != 4 {
		t.Errorf("after the upgrade: %d billing tables (%v), want 4", tables, err)
	}
	if rep, err := s.Migrate(ctx, false); err != nil || !strings.Contains(rep.Summary, "schema 17") {
		t.Errorf("Migrate = %+v, %v; want schema 17", rep, err)
	}
	if u, err := s.Users().Get(ctx, "user_1"); err != nil || u.LastEventID != "msg_1" {
		t.Errorf("the user after the upgrade = %+v, %v", u, err)
	}
	payer := models.Payer{Kind: models.KindUser, ID: "user_1"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ch := models.SubscriptionItemChange{SubscriptionItem: models.SubscriptionItem{ItemID: "csub_item_1", Payer: payer,
		Status: models.ItemActive, Plan: models.BillingPlan{ID: "cplan_1", Slug: "pro"}, SourceUpdatedAt: at, LastEventID: "msg_2"}}
	ev := models.Event{EventID: "msg_2", Type: models.TypeSubscriptionItemActive, EventType: models.EventActive, UserID: "user_1",
		ObjectID: "csub_item_1", RawBody: []byte(`{}`), Source: models.SourceClerk, ReceivedAt: at}
	if d, err := s.Deliver(ctx, ev, ch, at); err != nil || d.Outcome != models.OutcomeApplied {
		t.Fatalf("Deliver after the upgrade = %+v, %v", d, err)
	}
	if p, err := s.Billing().Plan(ctx, payer); err != nil || p.Status != models.PlanActive || p.Plan == nil || p.Plan.Slug != "pro" {
		t.Errorf("plan after the upgrade = %+v, %v; want pro, active", p, err)
	}
}

// TestUpgrade_AnEndpointOfSchema15KeepsItsURLAsLegacy opens a file of
// schema 15 holding an endpoint on plain http: schema 16 marks it as set
// before plain http was judged (models.Endpoint.LegacyURL), so that it
// keeps working; an endpoint created after the upgrade is not marked.
func TestUpgrade_AnEndpointOfSchema15KeepsItsURLAsLegacy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := fileAtSchema(t, dir, 15)
	if _, err := db.Exec(`INSERT INTO endpoints (id, url, description, event_types, enabled, disabled, secret, previous_secret,
		from_config, created_at, updated_at) VALUES ('ep_old', 'http://app.example.com/hooks', '', '[]', 1, '', 'whsec_a', '', 0, 1, 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	if e, err := s.Outbound().Endpoint(ctx, "ep_old"); err != nil || !e.LegacyURL || e.URL != "http://app.example.com/hooks" {
		t.Errorf("the endpoint after the upgrade = %+v, %v; want its URL, legacy", e, err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := s.Outbound().CreateEndpoint(ctx, models.Endpoint{ID: "ep_new", URL: "https://app.example.com/hooks", Secret: "whsec_b",
		CreatedAt: at, UpdatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if e, err := s.Outbound().Endpoint(ctx, "ep_new"); err != nil || e.LegacyURL {
		t.Errorf("an endpoint created after the upgrade = %+v, %v; want it not legacy", e, err)
	}
}
