package sync_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// clerkFixture reads a Clerk payload from models/testdata, with fn's
// changes to its envelope and data.
func clerkFixture(t *testing.T, name string, fn func(env, data map[string]any)) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "models", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if fn == nil {
		return raw
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatal(err)
	}
	fn(env, env["data"].(map[string]any))
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newService(s repotest.Store) *sync.Service {
	svc := sync.New(s.Events(), s, nil)
	return svc
}

func ingest(t *testing.T, svc *sync.Service, eventID string, body []byte) (sync.Result, error) {
	t.Helper()
	ce, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	return svc.Ingest(context.Background(), sync.Delivery{EventID: eventID, Signature: "v1,x", Body: body, Event: ce})
}

const (
	fixtureOrg    = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	fixtureMember = "orgmem_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	fixtureUser   = "user_2h8op3Isl1QR7tKu5FGNfaLKEoU"
)

// TestIngest_OrganizationAndMembershipEventsGoToTheirStores: each event is
// stored in the one inbox with its kind's ids and applied to its store,
// a membership first (its nested organization creates the organization).
func TestIngest_OrganizationAndMembershipEventsGoToTheirStores(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	svc := newService(s)
	for _, tc := range []struct {
		file, eventID  string
		userID, object string
		outcome        models.Outcome
		eventType      models.EventType
	}{
		{"openapi.organizationMembership.created.json", "msg_mc", fixtureUser, fixtureMember, models.OutcomeApplied, models.EventCreated},
		{"openapi.organization.created.json", "msg_oc", "", fixtureOrg, models.OutcomeApplied, models.EventCreated},
		{"openapi.organization.updated.json", "msg_ou", "", fixtureOrg, models.OutcomeApplied, models.EventUpdated},
		{"openapi.organizationMembership.updated.json", "msg_mu", fixtureUser, fixtureMember, models.OutcomeApplied, models.EventUpdated},
	} {
		res, err := ingest(t, svc, tc.eventID, clerkFixture(t, tc.file, nil))
		if err != nil || res.Status != models.StatusProcessed || res.Outcome != tc.outcome || res.UserID != tc.userID || res.ObjectID != tc.object {
			t.Fatalf("%s: Ingest = %+v, %v", tc.file, res, err)
		}
		ev, err := s.Events().Get(ctx, tc.eventID)
		if err != nil || ev.UserID != tc.userID || ev.ObjectID != tc.object || ev.EventType != tc.eventType || ev.SourceTimestamp == nil {
			t.Errorf("%s: stored event = %+v, %v", tc.file, ev, err)
		}
	}
	org, err := s.Organizations().Get(ctx, fixtureOrg)
	if err != nil || org.Name != "Acme Corp Updated" {
		t.Errorf("organization = %+v, %v", org, err)
	}
	m, err := s.Memberships().Get(ctx, fixtureMember)
	if err != nil || m.Role != "org:admin" || m.OrgID != fixtureOrg || m.UserID != fixtureUser {
		t.Errorf("membership = %+v, %v", m, err)
	}
	// The same delivery again is a duplicate.
	res, err := ingest(t, svc, "msg_mu", clerkFixture(t, "openapi.organizationMembership.updated.json", nil))
	if err != nil || !res.Duplicate || res.Outcome != models.OutcomeApplied {
		t.Errorf("a duplicate = %+v, %v", res, err)
	}
	// A deletion carries the membership's last updated_at: the envelope's
	// time orders it, and it deletes by the membership's id.
	res, err = ingest(t, svc, "msg_md", clerkFixture(t, "openapi.organizationMembership.deleted.json", func(env, _ map[string]any) {
		env["timestamp"] = time.Now().Add(-time.Hour).UnixMilli()
	}))
	if err != nil || res.Outcome != models.OutcomeApplied {
		t.Fatalf("membership deletion = %+v, %v", res, err)
	}
	if m, _ := s.Memberships().Get(ctx, fixtureMember); !m.Deleted() {
		t.Errorf("membership after its deletion = %+v", m)
	}
	res, err = ingest(t, svc, "msg_late", clerkFixture(t, "openapi.organizationMembership.updated.json", func(_, d map[string]any) {
		d["updated_at"] = time.Now().UnixMilli()
	}))
	if err != nil || res.Outcome != models.OutcomeDeleted {
		t.Errorf("a later update of a deleted membership = %+v, %v; want deleted", res, err)
	}
}

func TestIngest_AnInvalidMembershipIsStoredAsFailedWithItsIds(t *testing.T) {
	s := repotest.NewStore(t)
	res, err := ingest(t, newService(s), "msg_bad", clerkFixture(t, "openapi.organizationMembership.created.json", func(_, d map[string]any) {
		delete(d, "organization")
	}))
	if !errors.Is(err, models.ErrInvalid) || res.Status != models.StatusFailed {
		t.Fatalf("Ingest = %+v, %v; want failed with ErrInvalid", res, err)
	}
	ev, err := s.Events().Get(context.Background(), "msg_bad")
	if err != nil || ev.Status != models.StatusFailed || ev.UserID != fixtureUser || ev.ObjectID != fixtureMember || ev.RetryAt != nil {
		t.Errorf("stored event = %+v, %v; want failed, found by its member and membership, not retried", ev, err)
	}
}

// TestSweep_AnOrganizationDeletionLeftStoredIsAppliedWithItsCascade: the
// process died after storing organization.deleted; the sweep applies it,
// and the organization's memberships go with it.
func TestSweep_AnOrganizationDeletionLeftStoredIsAppliedWithItsCascade(t *testing.T) {
	ctx := context.Background()
	s := repotest.NewStore(t)
	svc := newService(s)
	if _, err := ingest(t, svc, "msg_mc", clerkFixture(t, "openapi.organizationMembership.created.json", nil)); err != nil {
		t.Fatal(err)
	}
	body := clerkFixture(t, "openapi.organization.deleted.json", nil)
	ce, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1716883300, 0)
	if _, _, err := s.Events().Record(ctx, models.Event{
		EventID: "msg_od", Type: ce.Type, EventType: ce.EventType(), ObjectID: ce.ObjectID(), RawBody: body,
		Source: models.SourceClerk, ReceivedAt: time.Now().Add(-time.Hour), Status: models.StatusStored, SourceTimestamp: &ts,
	}); err != nil {
		t.Fatal(err)
	}
	rec := &sync.Recovery{Service: svc, Store: s.Events(), Grace: time.Minute}
	rep, err := rec.SweepOnce(ctx)
	if err != nil || rep.Swept[models.StatusProcessed] != 1 {
		t.Fatalf("SweepOnce = %+v, %v", rep, err)
	}
	if o, _ := s.Organizations().Get(ctx, fixtureOrg); !o.Deleted() {
		t.Errorf("organization after the sweep = %+v", o)
	}
	if m, _ := s.Memberships().Get(ctx, fixtureMember); !m.Deleted() {
		t.Errorf("membership after the sweep = %+v, want deleted with its organization", m)
	}
}
