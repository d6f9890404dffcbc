package models_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// edit decodes the fixture, lets fn change it, and encodes it again.
func edit(t *testing.T, name string, fn func(env, data map[string]any)) []byte {
	t.Helper()
	var env map[string]any
	if err := json.Unmarshal(fixture(t, name), &env); err != nil {
		t.Fatal(err)
	}
	fn(env, env["data"].(map[string]any))
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decode(t *testing.T, body []byte) models.ClerkEvent {
	t.Helper()
	ev, err := models.DecodeEvent(body)
	if err != nil {
		t.Fatalf("DecodeEvent: %v", err)
	}
	return ev
}

func TestKind_OnlyOrganizationsAndMembershipsJoinUsers(t *testing.T) {
	for file, want := range map[string]models.Kind{
		"openapi.user.created.json":                    models.KindUser,
		"openapi.organization.created.json":            models.KindOrganization,
		"openapi.organization.updated.json":            models.KindOrganization,
		"openapi.organization.deleted.json":            models.KindOrganization,
		"openapi.organizationMembership.created.json":  models.KindMembership,
		"openapi.organizationMembership.updated.json":  models.KindMembership,
		"openapi.organizationMembership.deleted.json":  models.KindMembership,
		"openapi.organizationInvitation.accepted.json": models.KindInvitation,
		"openapi.session.created.json":                 models.KindUser, // projected onto its user
	} {
		ev := decode(t, fixture(t, file))
		if ev.Kind() != want || ev.IsStored() != (want != "") {
			t.Errorf("%s: Kind() = %q, IsStored() = %v; want %q", file, ev.Kind(), ev.IsStored(), want)
		}
	}
	for typ, want := range map[string]models.EventType{
		"organization.deleted": models.EventDeleted, "organizationMembership.updated": models.EventUpdated,
		"user.created": models.EventCreated, "organizationDomain.created": "", "role.created": "",
	} {
		if got := (models.ClerkEvent{Type: typ}).EventType(); got != want {
			t.Errorf("EventType of %s = %q, want %q", typ, got, want)
		}
	}
}

func TestOrganizationChange_FromClerkFixtures(t *testing.T) {
	ev := decode(t, fixture(t, "openapi.organization.updated.json"))
	ch, err := ev.OrganizationChange("msg_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ch.OrgID != "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S" || ch.Name != "Acme Corp Updated" || ch.Slug != "acme-corp-updated" ||
		ch.ImageURL != "https://img.clerk.com/yyyyyy" || ch.CreatedBy != "user_2g7np7Hrk0SN6kj5EDMLDaKNL0S" ||
		ch.MembersCount == nil || *ch.MembersCount != 3 || ch.MaxAllowedMemberships == nil || *ch.MaxAllowedMemberships != 10 ||
		!ch.SourceTime.Equal(time.UnixMilli(1716883500000)) || ch.SourceCreatedAt == nil ||
		!ch.SourceCreatedAt.Equal(time.UnixMilli(1716883200000)) || ch.Deleted {
		t.Errorf("OrganizationChange = %+v", ch)
	}
	if string(ch.Metadata) != `{"department":"engineering"}` || strings.Contains(string(ch.Metadata), "ORG-123") {
		t.Errorf("metadata = %s, want public_metadata only", ch.Metadata)
	}
	if ev.ObjectID() != ch.OrgID || ev.UserID() != "" {
		t.Errorf("ObjectID() = %q, UserID() = %q", ev.ObjectID(), ev.UserID())
	}

	del := decode(t, fixture(t, "openapi.organization.deleted.json"))
	ch, err = del.OrganizationChange("msg_2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// No updated_at: the envelope's timestamp (in seconds there).
	if !ch.Deleted || ch.OrgID != "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S" || !ch.SourceTime.Equal(time.Unix(1716883200, 0)) {
		t.Errorf("deletion = %+v, want a deletion at the envelope's timestamp", ch)
	}
}

func TestMembershipChange_IdsComeFromTheNestedObjects(t *testing.T) {
	ev := decode(t, fixture(t, "openapi.organizationMembership.updated.json"))
	ch, err := ev.MembershipChange("msg_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := models.Member{FirstName: "Jane", LastName: "Doe", ImageURL: "https://img.clerk.com/yyyyy", Identifier: "jane.doe@acme.com"}
	if ch.MembershipID != "orgmem_2g7np7Hrk0SN6kj5EDMLDaKNL0S" || ch.OrgID != "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S" ||
		ch.UserID != "user_2h8op3Isl1QR7tKu5FGNfaLKEoU" || ch.Role != "org:admin" || ch.RoleName != "Admin" ||
		!slices.Equal(ch.Permissions, []string{"org:posts:read", "org:posts:write", "org:posts:delete", "org:members:manage"}) ||
		ch.Member != want || !ch.SourceTime.Equal(time.UnixMilli(1716883500000)) || ch.Deleted {
		t.Errorf("MembershipChange = %+v", ch)
	}
	// The nested organization is a state of the organization, with its own
	// updated_at, stamped with the membership's event.
	if o := ch.Organization; o == nil || o.OrgID != ch.OrgID || o.Name != "Acme Corp" || o.EventID != "msg_1" ||
		!o.SourceTime.Equal(time.UnixMilli(1716883500000)) || *o.MembersCount != 2 {
		t.Errorf("nested organization = %+v", ch.Organization)
	}
	if ev.ObjectID() != ch.MembershipID || ev.UserID() != ch.UserID {
		t.Errorf("ObjectID() = %q, UserID() = %q", ev.ObjectID(), ev.UserID())
	}
}

// A deletion's updated_at is the membership's last update (days before the
// deletion in a real capture): the deletion's time is the envelope's.
func TestMembershipChange_ADeletionIsAtTheEnvelopesTime(t *testing.T) {
	body := edit(t, "openapi.organizationMembership.deleted.json", func(env, data map[string]any) {
		env["timestamp"] = 1717488000000 // a week after the last update
	})
	ch, err := decode(t, body).MembershipChange("msg_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Deleted || !ch.SourceTime.Equal(time.UnixMilli(1717488000000)) || ch.OrgID != "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S" ||
		ch.UserID != "user_2h8op3Isl1QR7tKu5FGNfaLKEoU" || ch.Organization == nil {
		t.Errorf("deletion = %+v, want the membership deleted at the envelope's time, ids and organization kept", ch)
	}
	// A stub that names only the membership is a deletion too.
	stub := []byte(`{"type":"organizationMembership.deleted","timestamp":1717488000000,"data":{"id":"orgmem_1","object":"organization_membership","deleted":true}}`)
	ch, err = decode(t, stub).MembershipChange("msg_2", time.Now())
	if err != nil || !ch.Deleted || ch.MembershipID != "orgmem_1" || ch.OrgID != "" || ch.Organization != nil {
		t.Errorf("stub deletion = %+v, %v", ch, err)
	}
}

func TestMembershipChange_NewerFieldsAreAcceptedAndKept(t *testing.T) {
	body := edit(t, "openapi.organizationMembership.created.json", func(env, data map[string]any) {
		data["organization"].(map[string]any)["role_set_key"] = "role_set:default"
		u := data["public_user_data"].(map[string]any)
		u["banned"], u["deprovisioned"], u["username"] = true, true, "jane"
		data["something_new"] = map[string]any{"x": 1}
	})
	ch, err := decode(t, body).MembershipChange("msg_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Member.Banned || !ch.Member.Deprovisioned || ch.Member.Username != "jane" {
		t.Errorf("member = %+v, want banned, deprovisioned and the username kept", ch.Member)
	}
}

func TestMembershipChange_RefusesWhatCanNeverApply(t *testing.T) {
	for name, fn := range map[string]func(env, data map[string]any){
		"no organization":      func(_, d map[string]any) { delete(d, "organization") },
		"no user":              func(_, d map[string]any) { delete(d, "public_user_data") },
		"a user id of another": func(_, d map[string]any) { d["public_user_data"].(map[string]any)["user_id"] = "org_1" },
		"no updated_at":        func(_, d map[string]any) { delete(d, "updated_at") },
		"metadata not object":  func(_, d map[string]any) { d["public_metadata"] = []any{1} },
		"permissions a string": func(_, d map[string]any) { d["permissions"] = "org:all" },
		"not a membership id":  func(_, d map[string]any) { d["id"] = "user_1" },
	} {
		ev := decode(t, edit(t, "openapi.organizationMembership.created.json", fn))
		if _, err := ev.MembershipChange("msg_1", time.Now()); !errors.Is(err, models.ErrInvalid) {
			t.Errorf("%s: error %v, want ErrInvalid", name, err)
		}
	}
	// A failed event can still be found by its ids.
	ev := decode(t, edit(t, "openapi.organizationMembership.created.json", func(_, d map[string]any) { delete(d, "organization") }))
	if ev.ObjectID() != "orgmem_2g7np7Hrk0SN6kj5EDMLDaKNL0S" || ev.UserID() != "user_2h8op3Isl1QR7tKu5FGNfaLKEoU" {
		t.Errorf("ids of an invalid membership: %q, %q", ev.ObjectID(), ev.UserID())
	}
	org := decode(t, edit(t, "openapi.organization.created.json", func(_, d map[string]any) { d["id"] = "user_1" }))
	if _, err := org.OrganizationChange("msg_1", time.Now()); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("an organization with a user id: %v, want ErrInvalid", err)
	}
}

func TestMemberOf_TheUsersCurrentRecord(t *testing.T) {
	u := models.User{UserID: "user_1", Profile: models.Profile{FirstName: "Ann", Username: "ann", PhoneNumber: "+1555", Banned: true}}
	if m := models.MemberOf(u); m.FirstName != "Ann" || m.Identifier != "+1555" || !m.Banned || m.Username != "ann" {
		t.Errorf("MemberOf = %+v, want the phone as identifier when there is no email", m)
	}
	u.Email = "ann@example.com"
	if m := models.MemberOf(u); m.Identifier != "ann@example.com" {
		t.Errorf("identifier = %q, want the email", m.Identifier)
	}
	active := models.Membership{MembershipID: "orgmem_1"}
	flagged := active
	flagged.Member.Banned = true
	off := active
	off.Member.Deprovisioned = true
	for _, tc := range []struct {
		name              string
		m                 models.Membership
		orgGone, userGone bool
		want              bool
	}{
		{"active", active, false, false, true},
		{"banned member: kept, flagged", flagged, false, false, true},
		{"deprovisioned member", off, false, false, false},
		{"organization deleted", active, true, false, false},
		{"user deleted", active, false, true, false},
	} {
		if got := models.ActiveMember(tc.m, tc.orgGone, tc.userGone); got != tc.want {
			t.Errorf("%s: ActiveMember = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestChange_DeprovisionedIsKept(t *testing.T) {
	body := edit(t, "openapi.user.updated.json", func(_, d map[string]any) { d["deprovisioned"] = true })
	ch, err := decode(t, body).UserChange("msg_1", time.Now())
	if err != nil || !ch.Deprovisioned {
		t.Errorf("Change = %+v, %v; want deprovisioned", ch.Profile, err)
	}
}
