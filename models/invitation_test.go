package models_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

func TestInvitationChange_KeepsClerksExampleWithoutItsURL(t *testing.T) {
	now := time.UnixMilli(1716883500000).Add(time.Hour)
	for file, status := range map[string]string{
		"openapi.organizationInvitation.created.json":  models.InvitationPending,
		"openapi.organizationInvitation.accepted.json": models.InvitationAccepted,
		"openapi.organizationInvitation.revoked.json":  models.InvitationRevoked,
	} {
		ev := decode(t, fixture(t, file))
		ch, err := ev.Decode("msg_1", now)
		if err != nil {
			t.Fatalf("%s: Decode: %v", file, err)
		}
		inv, ok := ch.(models.InvitationChange)
		if !ok {
			t.Fatalf("%s: Decode = %T, want models.InvitationChange", file, ch)
		}
		if inv.InvitationID != "orginv_2g7np7Hrk0SN6kj5EDMLDaKNL0S" || inv.OrgID != "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S" ||
			inv.EmailAddress != "jane.doe@acme.com" || inv.Role != "org:member" || inv.RoleName != "Member" ||
			inv.Status != status || string(inv.Metadata) != "{}" {
			t.Errorf("%s: change = %+v", file, inv)
		}
		if inv.ExpiresAt == nil || !inv.ExpiresAt.Equal(time.UnixMilli(1717487999000)) {
			t.Errorf("%s: ExpiresAt = %v, want Clerk's expires_at", file, inv.ExpiresAt)
		}
		if ev.Kind() != models.KindInvitation || ev.ObjectID() != inv.InvitationID {
			t.Errorf("%s: Kind, ObjectID = %q, %q", file, ev.Kind(), ev.ObjectID())
		}
	}
	ev := decode(t, fixture(t, "openapi.organizationInvitation.accepted.json"))
	if got := ev.UserID(); got != "user_2h8op3Isl1QR7tKu5FGNfaLKEoU" {
		t.Errorf("UserID of an accepted invitation = %q, want the user who accepted it", got)
	}
	if got := models.EventTypeOf(models.TypeInvitationAccepted); got != models.EventAccepted {
		t.Errorf("EventTypeOf(accepted) = %q", got)
	}
}

func TestInvitationChange_RefusesWhatIsNotAnInvitation(t *testing.T) {
	now := time.UnixMilli(1716883500000).Add(time.Hour)
	for name, data := range map[string]string{
		"no organization":  `{"id":"orginv_1","updated_at":1716883500000,"status":"pending","email_address":"a@b.c"}`,
		"unknown status":   `{"id":"orginv_1","organization_id":"org_1","updated_at":1716883500000,"status":"lost"}`,
		"not an id":        `{"id":"inv_1","organization_id":"org_1","updated_at":1716883500000,"status":"pending"}`,
		"no updated_at":    `{"id":"orginv_1","organization_id":"org_1","status":"pending"}`,
		"email too long":   `{"id":"orginv_1","organization_id":"org_1","updated_at":1716883500000,"status":"pending","email_address":"` + strings.Repeat("a", 600) + `"}`,
		"metadata not obj": `{"id":"orginv_1","organization_id":"org_1","updated_at":1716883500000,"status":"pending","public_metadata":[1]}`,
	} {
		ev := models.ClerkEvent{Type: models.TypeInvitationCreated, Data: []byte(data), Timestamp: []byte("1716883500000")}
		if _, err := ev.Decode("msg_1", now); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("%s: Decode error = %v, want ErrInvalid", name, err)
		}
	}
}

func TestInvitation_APendingOnePastItsExpiryReadsAsExpired(t *testing.T) {
	exp := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		status  string
		expires *time.Time
		now     time.Time
		want    string
	}{
		{models.InvitationPending, &exp, exp.Add(-time.Millisecond), models.InvitationPending},
		{models.InvitationPending, &exp, exp, models.InvitationExpired},
		{models.InvitationPending, nil, exp.Add(time.Hour), models.InvitationPending},
		{models.InvitationAccepted, &exp, exp.Add(time.Hour), models.InvitationAccepted},
		{models.InvitationRevoked, &exp, exp.Add(time.Hour), models.InvitationRevoked},
	} {
		inv := models.Invitation{Status: tc.status, ExpiresAt: tc.expires}
		if got := inv.StatusAt(tc.now); got != tc.want {
			t.Errorf("StatusAt(%v) of %s expiring %v = %q, want %q", tc.now, tc.status, tc.expires, got, tc.want)
		}
	}
}

func TestOutboundTypes_InvitationsAreDeletedByTheirOrganization(t *testing.T) {
	types := models.OutboundTypes()
	for _, want := range []string{"organizationInvitation.created", "organizationInvitation.updated", "organizationInvitation.deleted"} {
		found := false
		for _, typ := range types {
			found = found || typ == want
		}
		if !found {
			t.Errorf("OutboundTypes() = %v, want %s in it", types, want)
		}
	}
}
