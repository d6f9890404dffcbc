package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The ids of Clerk's invitation example (models/testdata).
const (
	fxInvitation = "orginv_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	fxInvOrg     = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
)

// invitationBody is Clerk's example file with the invitation's id
// suffixed by suffix and, when expires is set, its expires_at.
func invitationBody(t *testing.T, file, suffix string, expires time.Time) []byte {
	t.Helper()
	b := bytes.ReplaceAll(fixture(t, file), []byte(fxInvitation), []byte(fxInvitation+suffix))
	if !expires.IsZero() {
		b = bytes.ReplaceAll(b, []byte(`"expires_at": 1717487999000`), []byte(fmt.Sprintf(`"expires_at": %d`, expires.UnixMilli())))
	}
	return b
}

// invitationIDs reads every page of an organization's invitations at
// path (with its query), limit 1, and returns their ids and statuses.
func (h *harness) invitationIDs(path string) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	next := ""
	for range 50 {
		p := path + "&limit=1"
		if next != "" {
			p += "&cursor=" + url.QueryEscape(next)
		}
		r := h.get(p, testAPIKey)
		if r.Code != http.StatusOK {
			h.t.Fatalf("GET %s: %s", p, r)
		}
		var body struct {
			Data       []map[string]any `json:"data"`
			NextCursor *string          `json:"nextCursor"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			h.t.Fatal(err)
		}
		for _, inv := range body.Data {
			out[inv["invitationId"].(string)] = inv["status"].(string)
		}
		if body.NextCursor == nil {
			return out
		}
		next = *body.NextCursor
	}
	h.t.Fatal("the pages do not end")
	return nil
}

// TestInvitations_TheWebhookStoresClerksExamplesAndTheReadsShowTheNewest
// delivers Clerk's created and accepted of one invitation (the accepted
// first), and created states of invitations still pending and of one past
// its expiry: each reads as its newest state, a pending one past its
// expiresAt as expired, and neither the invitation's url (its token) nor
// its private_metadata is ever shown.
func TestInvitations_TheWebhookStoresClerksExamplesAndTheReadsShowTheNewest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	future := time.Now().Add(7 * 24 * time.Hour).Truncate(time.Millisecond)
	accepted := h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.accepted.json", "", future))
	created := h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.created.json", "", future))
	if accepted["status"] != "processed" || accepted["outcome"] != "applied" || created["outcome"] != "stale" {
		t.Errorf("answers = %v, %v; want the accepted applied, the older created stale", accepted, created)
	}
	h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.created.json", "P", future))
	h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.created.json", "X", time.Time{}))
	h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.revoked.json", "R", future))

	r := h.get("/v1/organizations/"+fxInvOrg+"/invitations/"+fxInvitation, testAPIKey)
	if r.Code != http.StatusOK {
		t.Fatalf("GET the invitation: %s", r)
	}
	inv := r.JSON(t)
	if inv["status"] != "accepted" || inv["emailAddress"] != "jane.doe@acme.com" || inv["userId"] != "user_2h8op3Isl1QR7tKu5FGNfaLKEoU" ||
		inv["organizationId"] != fxInvOrg || inv["role"] != "org:member" || !sameTime(inv["expiresAt"], future) {
		t.Errorf("invitation = %v; want the accepted state", inv)
	}
	if strings.Contains(string(r.Body), "token") || strings.Contains(string(r.Body), "private") {
		t.Errorf("the invitation shows its url or private metadata: %s", r.Body)
	}
	for query, want := range map[string]map[string]string{
		"?":                {fxInvitation: "accepted", fxInvitation + "P": "pending", fxInvitation + "X": "expired", fxInvitation + "R": "revoked"},
		"?status=pending":  {fxInvitation + "P": "pending"},
		"?status=expired":  {fxInvitation + "X": "expired"},
		"?status=accepted": {fxInvitation: "accepted"},
		"?status=revoked":  {fxInvitation + "R": "revoked"},
	} {
		got := h.invitationIDs("/v1/organizations/" + fxInvOrg + "/invitations" + query)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("list %s = %v, want %v", query, got, want)
		}
	}
}

// TestInvitations_DeletedWithTheirOrganizationInEitherOrder deletes the
// organization before one invitation arrives and after another: neither
// is listed or found any more; an admin reads them deleted.
func TestInvitations_DeletedWithTheirOrganizationInEitherOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	future := time.Now().Add(7 * 24 * time.Hour)
	h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.created.json", "B", future))
	if got := h.mustDeliver(newID(), fixture(t, "openapi.organization.deleted.json")); got["outcome"] != "applied" {
		t.Fatalf("organization.deleted = %v", got)
	}
	if got := h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.accepted.json", "A", future)); got["outcome"] != "deleted" {
		t.Errorf("an invitation of a deleted organization = %v, want outcome deleted", got)
	}
	if got := h.invitationIDs("/v1/organizations/" + fxInvOrg + "/invitations?"); len(got) != 0 {
		t.Errorf("the deleted organization's invitations = %v, want none", got)
	}
	for _, id := range []string{fxInvitation + "A", fxInvitation + "B"} {
		path := "/v1/organizations/" + fxInvOrg + "/invitations/" + id
		if r := h.get(path, testAPIKey); r.Code != http.StatusNotFound {
			t.Errorf("GET %s = %s, want 404", id, r)
		}
		r := h.get(path+"?includeDeleted=true", testAdminKey)
		if inv := r.JSON(t); r.Code != http.StatusOK || inv["deletedAt"] == nil || inv["emailAddress"] != nil {
			t.Errorf("GET %s as an admin = %s; want it deleted, without its email", id, r)
		}
	}
}

// TestInvitations_AClientsMistakeIsA4xx: an unknown status, a page size
// out of bounds, an id too long, a cursor that is not one, deleted
// invitations for an API key, an invitation asked of another
// organization.
func TestInvitations_AClientsMistakeIsA4xx(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), fixture(t, "openapi.organizationInvitation.created.json"))
	base := "/v1/organizations/" + fxInvOrg + "/invitations"
	for path, want := range map[string]int{
		base + "?status=lost":         http.StatusBadRequest,
		base + "?limit=0":             http.StatusBadRequest,
		base + "?limit=201":           http.StatusBadRequest,
		base + "?cursor=zz":           http.StatusBadRequest,
		base + "?includeDeleted=true": http.StatusForbidden,
		"/v1/organizations/" + strings.Repeat("o", 129) + "/invitations": http.StatusBadRequest,
		base + "/" + strings.Repeat("i", 129):                            http.StatusBadRequest,
		base + "/orginv_unknown":                                         http.StatusNotFound,
		"/v1/organizations/org_other/invitations/" + fxInvitation:        http.StatusNotFound,
	} {
		if r := h.get(path, testAPIKey); r.Code != want {
			t.Errorf("GET %s = %s, want %d", path, r, want)
		}
	}
	if r := h.get(base, ""); r.Code != http.StatusUnauthorized {
		t.Errorf("GET without a key = %s, want 401", r)
	}
}

// sameTime reports whether v, a time as the API writes it, is t.
func sameTime(v any, t time.Time) bool {
	s, _ := v.(string)
	got, err := time.Parse(time.RFC3339Nano, s)
	return err == nil && got.Equal(t)
}
