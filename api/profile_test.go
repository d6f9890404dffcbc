package api_test

import (
	"net/http"
	"reflect"
	"testing"
)

func TestUsers_ProfileFieldsFollowClerkAndClearOnTheTombstone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	const id = "user_231Rs4m996yAJAsHmT3BFLkG8Mw"
	profile := func(u map[string]any) map[string]any {
		out := map[string]any{}
		for _, k := range []string{"firstName", "lastName", "username", "imageUrl", "phoneNumber", "externalId", "lastSignInAt", "banned", "locked"} {
			v, ok := u[k]
			if !ok {
				t.Errorf("user has no %q field: %v", k, u)
			}
			out[k] = v
		}
		return out
	}
	img := "https://img.clerk.com/eyJ0eXBlIjoiZGVmYXVsdCIsImlpZCI6Imluc18yelNCTnRydXJIT2hXRmptZWRkbFVFUm1xSlUiLCJyaWQiOiJ1c2VyXzIzMVJzNG05OTZ5QUpBc0htVDNCRkxrRzhNdyJ9"
	newer := map[string]any{
		"firstName": "Sam", "lastName": "Okafor", "username": "sam_okafor", "imageUrl": img,
		"phoneNumber": "+442079460958", "externalId": "acct-4417", "lastSignInAt": "2025-10-16T12:29:50.000Z",
		"banned": true, "locked": true,
	}
	steps := []struct {
		name, file string
		want       map[string]any
	}{
		{"phone-only user: strings Clerk lacks are null", "user.created.phone-only.json", map[string]any{
			"firstName": nil, "lastName": nil, "username": nil, "imageUrl": img, "phoneNumber": "+12025550143",
			"externalId": nil, "lastSignInAt": nil, "banned": false, "locked": false,
		}},
		{"several phones: the primary one, not the first", "user.updated.multi-phone.json", newer},
		{"an older state changes nothing", "user.created.phone-only.json", newer},
	}
	for _, st := range steps {
		h.mustDeliver(newID(), fixture(t, st.file))
		if got := profile(h.user(id)); !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: profile = %v\nwant %v", st.name, got, st.want)
		}
	}
	r := h.get("/v1/users/"+id, testAPIKey)
	if r.Code != http.StatusOK || r.JSON(t)["phoneNumber"] != "+442079460958" {
		t.Errorf("GET user with an API key = %s", r)
	}

	h.mustDeliver(newID(), deleteBody(t, id, 1760617903160))
	cleared := map[string]any{
		"firstName": nil, "lastName": nil, "username": nil, "imageUrl": nil, "phoneNumber": nil,
		"externalId": nil, "lastSignInAt": nil, "banned": false, "locked": false,
	}
	if got := profile(h.user(id)); !reflect.DeepEqual(got, cleared) {
		t.Errorf("tombstone profile = %v, want %v", got, cleared)
	}
	// A tombstone written before any state of the user has the same shape.
	h.mustDeliver(newID(), deleteBody(t, "user_neverseen", t0))
	if got := profile(h.user("user_neverseen")); !reflect.DeepEqual(got, cleared) {
		t.Errorf("tombstone of an unseen user: profile = %v, want %v", got, cleared)
	}
	if u := h.user(id); u["email"] != nil {
		t.Errorf("tombstone has an email: %v", u)
	}
}
