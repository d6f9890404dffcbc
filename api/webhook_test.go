package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	stdsync "sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
)

const t0 = int64(1_760_000_000_000) // Unix ms

func TestWebhook_ClerkFixturesSync(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture string
		userID  string
		want    map[string]any // fields of the API user
	}{
		{"user.created.json", "user_29w83sxmDNGwOuEthce5gg56FcC", map[string]any{
			"email": "example@example.org", "displayName": "Example Example", "metadata": map[string]any{}}},
		{"user.updated.json", "user_29w83sxmDNGwOuEthce5gg56FcC", map[string]any{
			"email": "jordan.rivera@example.com", "displayName": "Jordan Rivera"}},
		{"user.created.multi-email.json", "user_2SS3GNsVEHibIcFNY6OA4j9lef2", map[string]any{
			"email": "alex@example.com", "displayName": "Alex Example",
			"metadata": map[string]any{"plan": "pro", "roles": []any{"editor"}}}},
		{"user.created.phone-only.json", "user_231Rs4m996yAJAsHmT3BFLkG8Mw", map[string]any{
			"email": nil, "displayName": "+12025550143"}},
		{"openapi.user.created.json", "", nil},
		{"openapi.user.updated.json", "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			h := newHarness(t)
			body := fixture(t, tc.fixture)
			res := h.mustDeliver(newID(), body)
			if res["status"] != "processed" || res["outcome"] != "applied" || res["duplicate"] != false {
				t.Fatalf("webhook answer = %v, want processed/applied/not duplicate", res)
			}
			if tc.userID == "" {
				return
			}
			r := h.get("/v1/users/"+tc.userID, testAPIKey)
			if r.Code != http.StatusOK {
				t.Fatalf("GET user: %s", r)
			}
			u := r.JSON(t)
			for k, want := range tc.want {
				if got := u[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("user[%q] = %#v, want %#v", k, got, want)
				}
			}
			if bytes.Contains(r.Body, []byte("private")) || bytes.Contains(r.Body, []byte("cus_TEST")) {
				t.Errorf("users API shows private metadata: %s", r.Body)
			}
			if u["deletedAt"] != nil {
				t.Errorf("deletedAt = %v, want null", u["deletedAt"])
			}
		})
	}
}

// state is the part of a user that must converge whatever the order of
// delivery (createdAt and updatedAt are usersync's own clock).
func state(u map[string]any) map[string]any {
	if u == nil {
		return nil
	}
	s := map[string]any{}
	for k, v := range u {
		if k != "createdAt" && k != "updatedAt" {
			s[k] = v
		}
	}
	return s
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

func TestWebhook_EveryOrderConvergesOnTheNewestState(t *testing.T) {
	t.Parallel()
	const uid = "user_order"
	created := userBody(t, "user.created", clerkUser{ID: uid, UpdatedAt: t0, Email: "first@example.com", First: "Ada", Last: "One", Meta: map[string]any{"v": 1}})
	updated := userBody(t, "user.updated", clerkUser{ID: uid, UpdatedAt: t0 + 1000, Email: "Second@Example.com", First: "Ada", Last: "Two", Meta: map[string]any{"v": 2}})
	deleted := deleteBody(t, uid, t0+2000)

	for _, set := range []struct {
		name   string
		bodies [][]byte
	}{
		{"created,updated", [][]byte{created, updated}},
		{"created,updated,deleted", [][]byte{created, updated, deleted}},
	} {
		var want map[string]any
		for _, order := range permutations(len(set.bodies)) {
			name := fmt.Sprintf("%s/order%v", set.name, order)
			t.Run(name, func(t *testing.T) {
				h := newHarness(t)
				for _, i := range order {
					res := h.mustDeliver(newID(), set.bodies[i])
					if res["status"] != "processed" {
						t.Fatalf("event %d: %v", i, res)
					}
				}
				got := state(h.user(uid))
				if want == nil {
					want = got
					t.Logf("final state: %v", got)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("final state = %v\nwant          %v", got, want)
				}
				if len(set.bodies) == 2 && (got["email"] != "second@example.com" || got["displayName"] != "Ada Two") {
					t.Errorf("final state = %v, want the updated user", got)
				}
				if len(set.bodies) == 3 {
					if got["deletedAt"] != "2025-10-09T08:53:22.000Z" || got["email"] != nil {
						t.Errorf("final state = %v, want deleted at the delete's Clerk time, with no email", got)
					}
					if r := h.get("/v1/users/"+uid, testAPIKey); r.Code != http.StatusNotFound {
						t.Errorf("GET deleted user = %s, want 404", r)
					}
				}
			})
		}
	}
}

func TestWebhook_DuplicateDeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_dup", UpdatedAt: t0, Email: "dup@example.com", First: "D"})
	first := h.mustDeliver(id, body)
	before := h.user("user_dup")
	time.Sleep(5 * time.Millisecond)

	// Svix re-signs each retry with a fresh timestamp.
	r := h.post(body, sign(t, testSecret, id, time.Now().Add(time.Second), body))
	if r.Code != http.StatusOK {
		t.Fatalf("retry: %s", r)
	}
	again := r.JSON(t)
	if again["duplicate"] != true || again["status"] != "processed" || again["outcome"] != first["outcome"] {
		t.Errorf("retry answer = %v, want a processed duplicate with outcome %v", again, first["outcome"])
	}
	if after := h.user("user_dup"); !reflect.DeepEqual(after, before) {
		t.Errorf("user after retry = %v, want unchanged %v", after, before)
	}
	if n := h.countEvents(); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
	if ev := h.event(id); ev["attempts"] != int32(1) {
		t.Errorf("attempts = %v, want 1", ev["attempts"])
	}
}

func TestWebhook_ConcurrentDuplicatesStoreOneEventAndChangeTheUserOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_conc", UpdatedAt: t0, Email: "conc@example.com", First: "C"})

	const n = 30
	var wg stdsync.WaitGroup
	results := make([]response, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = h.post(body, sign(t, testSecret, id, time.Now(), body))
		}()
	}
	wg.Wait()
	firsts := 0
	for i, r := range results {
		if r.Code != http.StatusOK {
			t.Errorf("delivery %d: %s", i, r)
			continue
		}
		res := r.JSON(t)
		if res["outcome"] != "applied" || res["status"] != "processed" {
			t.Errorf("delivery %d: %v, want processed/applied", i, res)
		}
		if res["duplicate"] == false {
			firsts++
		}
	}
	if firsts != 1 {
		t.Errorf("%d deliveries answered duplicate=false, want 1", firsts)
	}
	if got := h.countEvents(); got != 1 {
		t.Errorf("%d events stored, want 1", got)
	}
	if got := h.countUsers(); got != 1 {
		t.Errorf("%d users stored, want 1", got)
	}
	// Written once: a second write would have moved updatedAt.
	if u, err := h.store.Users().Get(context.Background(), "user_conc"); err != nil || !u.UpdatedAt.Equal(u.CreatedAt) {
		t.Errorf("user = %+v, %v; want it written once (updatedAt = createdAt)", u, err)
	}
}

func TestWebhook_StaleUpdateIsIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_s", UpdatedAt: t0 + 2000, Email: "new@example.com", First: "New"}))
	res := h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_s", UpdatedAt: t0 + 1000, Email: "old@example.com", First: "Old"}))
	if res["outcome"] != "stale" || res["status"] != "processed" {
		t.Errorf("older update answered %v, want processed/stale", res)
	}
	if u := h.user("user_s"); u["email"] != "new@example.com" || u["displayName"] != "New" {
		t.Errorf("user = %v, want the newer state", u)
	}
}

func TestWebhook_LateUpdateNeverRevivesADeletedUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_l", UpdatedAt: t0, Email: "l@example.com"}))
	h.mustDeliver(newID(), deleteBody(t, "user_l", t0+1000))
	// Even a state that claims to be newer than the delete stays out.
	res := h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_l", UpdatedAt: t0 + 5000, Email: "l@example.com", First: "Back"}))
	if res["outcome"] != "deleted" {
		t.Errorf("late update answered %v, want outcome deleted", res)
	}
	u := h.user("user_l")
	if u["deletedAt"] == nil || u["email"] != nil || u["displayName"] != "user_l" {
		t.Errorf("user = %v, want a tombstone", u)
	}
	if r := h.get("/v1/users?email=l@example.com", testAPIKey); !bytes.Contains(r.Body, []byte(`"data":[]`)) {
		t.Errorf("active users with the deleted email: %s", r)
	}
}

func TestWebhook_DeleteBeforeCreateLeavesATombstone(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	res := h.mustDeliver(newID(), fixture(t, "user.deleted.json"))
	if res["outcome"] != "applied" {
		t.Errorf("delete of an unseen user answered %v, want applied", res)
	}
	res = h.mustDeliver(newID(), fixture(t, "user.created.json"))
	if res["outcome"] != "deleted" {
		t.Errorf("late create answered %v, want deleted", res)
	}
	u := h.user("user_29w83sxmDNGwOuEthce5gg56FcC")
	if u == nil || u["deletedAt"] != "2022-06-02T15:56:40.123Z" || u["email"] != nil {
		t.Errorf("user = %v, want a tombstone deleted at the event's time", u)
	}
	if r := h.get("/v1/users/user_29w83sxmDNGwOuEthce5gg56FcC", testAPIKey); r.Code != http.StatusNotFound {
		t.Errorf("app GET of the tombstone = %s, want 404", r)
	}
}

func TestWebhook_DeleteTimestampInSecondsIsAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	res := h.mustDeliver(newID(), fixture(t, "openapi.user.deleted.json"))
	if res["outcome"] != "applied" {
		t.Fatalf("answer = %v", res)
	}
	if u := h.user("user_2g7np7Hrk0SN6kj5EDMLDaKNL0S"); u["deletedAt"] != "2024-05-28T08:00:00.000Z" {
		t.Errorf("deletedAt = %v, want 2024-05-28T08:00:00.000Z", u["deletedAt"])
	}
}

func TestWebhook_EmailOfADeletedUserCanBeReused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_a", UpdatedAt: t0, Email: "shared@example.com"}))
	h.mustDeliver(newID(), deleteBody(t, "user_a", t0+1000))
	res := h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_b", UpdatedAt: t0 + 2000, Email: "shared@example.com"}))
	if res["outcome"] != "applied" {
		t.Fatalf("new user with a deleted user's email answered %v", res)
	}
	if u := h.user("user_b"); u["email"] != "shared@example.com" {
		t.Errorf("user_b = %v", u)
	}
}

// flakyUsers fails every Apply while fail is set, as a database that
// refuses writes for a while would (with err, or models.ErrUnavailable).
type flakyUsers struct {
	fail atomic.Bool
	err  error
}

func (f *flakyUsers) before(context.Context, models.Change) error {
	if f.fail.Load() {
		if f.err != nil {
			return f.err
		}
		return fmt.Errorf("test outage: %w", models.ErrUnavailable)
	}
	return nil
}

func newFlakyHarness(t *testing.T) (*harness, *flakyUsers) {
	flaky := &flakyUsers{}
	h := newHarness(t, func(o *harnessOptions) {
		o.beforeApply = flaky.before
	})
	return h, flaky
}

func TestWebhook_AFailedDeliveryHealsOnSvixRetry(t *testing.T) {
	t.Parallel()
	h, flaky := newFlakyHarness(t)
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_2", UpdatedAt: t0 + 2000, Email: "E@example.com"})
	flaky.fail.Store(true)
	if r := h.deliver(id, body); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("delivery while writes fail = %s, want 503 so that Svix retries", r)
	}
	if ev := h.event(id); ev["status"] != "failed" || ev["error"] == nil || ev["attempts"] != int32(1) {
		t.Errorf("event = status %v error %v attempts %v, want failed with an error after 1 attempt", ev["status"], ev["error"], ev["attempts"])
	}
	flaky.fail.Store(false)
	res := h.mustDeliver(id, body) // Svix's retry
	if res["outcome"] != "applied" || res["duplicate"] != true {
		t.Errorf("retry answered %v, want an applied duplicate", res)
	}
	if u := h.user("user_2"); u["email"] != "e@example.com" {
		t.Errorf("user_2 = %v", u)
	}
	if ev := h.event(id); ev["status"] != "processed" || ev["error"] != nil || ev["attempts"] != int32(2) {
		t.Errorf("event = status %v error %v attempts %v, want processed after 2 attempts", ev["status"], ev["error"], ev["attempts"])
	}
}

// TestWebhook_ANewerStateTakesAnEmailFromAnOlderHolder: user_2 claims an
// email user_1 held in an older state, before user_1's update that gave
// it up arrives. Clerk gives an email one owner at a time: the claim
// applies at once, and user_1's late update applies too.
func TestWebhook_ANewerStateTakesAnEmailFromAnOlderHolder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_1", UpdatedAt: t0, Email: "e@example.com", First: "One"}))
	res := h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_2", UpdatedAt: t0 + 2000, Email: "E@example.com"}))
	if res["outcome"] != "applied" {
		t.Fatalf("the newer claim answered %v, want applied", res)
	}
	if u := h.user("user_2"); u["email"] != "e@example.com" {
		t.Errorf("user_2 = %v, want the email", u)
	}
	if u := h.user("user_1"); u["email"] != nil || u["displayName"] != "One" {
		t.Errorf("user_1 = %v, want its other fields and no email", u)
	}
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_1", UpdatedAt: t0 + 1000, Email: "other@example.com", First: "One"}))
	if u := h.user("user_1"); u["email"] != "other@example.com" {
		t.Errorf("user_1 after its late update = %v", u)
	}
	if page := h.get("/v1/users?email=e@example.com", testAPIKey).JSON(t)["data"].([]any); len(page) != 1 || page[0].(map[string]any)["userId"] != "user_2" {
		t.Errorf("the email finds %v, want user_2 alone", page)
	}
}

func TestWebhook_LongUnicodeNamesAreCutToCharacters(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	first := strings.Repeat("é", 200) + strings.Repeat("😀", 56) // 256 characters
	last := strings.Repeat("Ж", 256)
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_long", UpdatedAt: t0, First: first, Last: last}))
	name := h.user("user_long")["displayName"].(string)
	if n := utf8.RuneCountInString(name); n != models.MaxDisplayName || !utf8.ValidString(name) {
		t.Errorf("displayName has %d characters (valid UTF-8: %v), want %d", n, utf8.ValidString(name), models.MaxDisplayName)
	}
	if !strings.HasPrefix(first, name) {
		t.Errorf("displayName %q is not the start of the first name", name)
	}
}

func TestWebhook_MetadataWithAnyKeysRoundTrips(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	meta := `{"a.b":{"$gt":1},"$where":"x","%2E":true,"ключ":[1,2.5,null],"":"empty","nested":{"x.y.z":{"$":"$"}}}`
	body := []byte(strings.Replace(string(fixture(t, "user.created.json")), `"public_metadata": {}`, `"public_metadata": `+meta, 1))
	res := h.mustDeliver(newID(), body)
	if res["outcome"] != "applied" {
		t.Fatalf("answer = %v", res)
	}
	r := h.get("/v1/users/user_29w83sxmDNGwOuEthce5gg56FcC", testAPIKey)
	if !bytes.Contains(r.Body, []byte(`"metadata":`+meta)) {
		t.Errorf("user = %s\nwant metadata %s", r.Body, meta)
	}
}

func TestWebhook_RejectsWhatItCannotTrustOrUse(t *testing.T) {
	t.Parallel()
	valid := userBody(t, "user.created", clerkUser{ID: "user_r", UpdatedAt: t0, Email: "r@example.com"})
	now := time.Now()
	tests := []struct {
		name       string
		body       []byte
		header     func(id string, body []byte) http.Header
		wantCode   int
		wantEvents int
	}{
		{"forged signature", valid, func(id string, b []byte) http.Header { return sign(t, otherSecret, id, now, b) }, 401, 0},
		{"tampered body", valid, func(id string, b []byte) http.Header {
			return sign(t, testSecret, id, now, bytes.Replace(b, []byte("r@example.com"), []byte("x@example.com"), 1))
		}, 401, 0},
		{"timestamp 6 minutes old", valid, func(id string, b []byte) http.Header { return sign(t, testSecret, id, now.Add(-6*time.Minute), b) }, 401, 0},
		{"timestamp 6 minutes ahead", valid, func(id string, b []byte) http.Header { return sign(t, testSecret, id, now.Add(6*time.Minute), b) }, 401, 0},
		{"signature from another id", valid, func(id string, b []byte) http.Header {
			h := sign(t, testSecret, "msg_other", now, b)
			h.Set("svix-id", id)
			return h
		}, 401, 0},
		{"missing headers", valid, func(string, []byte) http.Header { return http.Header{} }, 400, 0},
		{"missing signature", valid, func(id string, b []byte) http.Header {
			h := sign(t, testSecret, id, now, b)
			h.Del("svix-signature")
			return h
		}, 400, 0},
		{"body over the limit", append(append([]byte(`{"type":"user.created","data":{"id":"user_big","x":"`), bytes.Repeat([]byte("a"), 3<<20)...), `"}}`...),
			func(id string, b []byte) http.Header { return sign(t, testSecret, id, now, b) }, 413, 0},
		{"malformed JSON", []byte(`{"type":"user.created","data":`), func(id string, b []byte) http.Header { return sign(t, testSecret, id, now, b) }, 400, 0},
		{"JSON that is not an object", []byte(`["user.created"]`), func(id string, b []byte) http.Header { return sign(t, testSecret, id, now, b) }, 400, 0},
		{"unknown event type", []byte(`{"type":"role.created","object":"event","data":{"id":"role_1","object":"role"}}`), func(id string, b []byte) http.Header { return sign(t, testSecret, id, now, b) }, 200, 0},
		{"user event without data.id", []byte(`{"type":"user.updated","timestamp":1760000000000,"data":{"updated_at":1760000000000}}`),
			func(id string, b []byte) http.Header { return sign(t, testSecret, id, now, b) }, 400, 1},
		{"user event with a non-numeric updated_at", []byte(`{"type":"user.updated","data":{"id":"user_x","updated_at":"yesterday"}}`),
			func(id string, b []byte) http.Header { return sign(t, testSecret, id, now, b) }, 400, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := newID()
			r := h.post(tc.body, tc.header(id, tc.body))
			if r.Code != tc.wantCode {
				t.Fatalf("status = %s, want %d", r, tc.wantCode)
			}
			body := r.JSON(t)
			if r.Code >= 400 {
				e, _ := body["error"].(map[string]any)
				if e == nil || e["code"] == "" || e["message"] == "" || e["requestId"] == "" {
					t.Errorf("error body = %s, want code, message and requestId", r.Body)
				}
			}
			if n := h.countEvents(); n != tc.wantEvents {
				t.Errorf("%d events stored, want %d", n, tc.wantEvents)
			}
			if n := h.countUsers(); n != 0 {
				t.Errorf("%d users stored, want 0", n)
			}
			if tc.wantEvents == 1 {
				if ev := h.event(id); ev["status"] != "failed" || ev["error"] == nil {
					t.Errorf("stored event = %v, want failed with its error", ev)
				}
			}
		})
	}
}

func TestWebhook_AcceptsEveryRotatedSecretAndSignature(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(o *harnessOptions) { o.secrets = []string{testSecret, otherSecret} })
	body := userBody(t, "user.created", clerkUser{ID: "user_rot", UpdatedAt: t0})
	if r := h.post(body, sign(t, otherSecret, newID(), time.Now(), body)); r.Code != http.StatusOK {
		t.Errorf("signed with the second secret: %s", r)
	}
	// During rotation Svix sends one signature per secret.
	id := newID()
	hdr := sign(t, testSecret, id, time.Now(), body)
	unknown := sign(t, "whsec_"+strings.Repeat("A", 32), id, time.Now(), body)
	hdr.Set("svix-signature", unknown.Get("svix-signature")+" "+hdr.Get("svix-signature"))
	if r := h.post(body, hdr); r.Code != http.StatusOK {
		t.Errorf("two signatures, the second valid: %s", r)
	}
	// webhook-* headers (Standard Webhooks) are read as well.
	id = newID()
	std := sign(t, testSecret, id, time.Now(), body)
	std2 := http.Header{}
	for _, k := range []string{"id", "timestamp", "signature"} {
		std2.Set("webhook-"+k, std.Get("svix-"+k))
	}
	if r := h.post(body, std2); r.Code != http.StatusOK {
		t.Errorf("webhook-* headers: %s", r)
	}
}

// stopEngineOnApply stops the engine when the first user write starts: the
// event is stored, the user is not.
type stopEngineOnApply struct {
	once stdsync.Once
	stop func()
}

func (s *stopEngineOnApply) before(context.Context, models.Change) error {
	s.once.Do(s.stop)
	return nil
}

func TestWebhook_EngineDownMidRequestIsA5xxAndARetryHeals(t *testing.T) {
	t.Parallel()
	engine := repotest.NewOutage(t)
	h := newHarness(t, func(o *harnessOptions) {
		o.store = engine
		o.beforeApply = (&stopEngineOnApply{stop: engine.Stop}).before
	})
	id := newID()
	body := userBody(t, "user.created", clerkUser{ID: "user_down", UpdatedAt: t0, Email: "down@example.com"})
	r := h.deliver(id, body)
	if r.Code < 500 {
		t.Fatalf("delivery while the engine stops = %s, want 5xx", r)
	}
	if r := h.get("/readyz", ""); r.Code != http.StatusServiceUnavailable {
		t.Errorf("readyz while the engine is down = %s, want 503", r)
	}

	engine.Start()
	if ev := h.event(id); ev["status"] != "stored" && ev["status"] != "failed" {
		t.Errorf("event after the outage = %v, want stored or failed", ev["status"])
	}
	if u := h.user("user_down"); u != nil {
		t.Errorf("user written although the engine was down: %v", u)
	}
	res := h.mustDeliver(id, body) // Svix's retry
	if res["status"] != "processed" || res["outcome"] != "applied" {
		t.Errorf("retry answered %v, want processed/applied", res)
	}
	if u := h.user("user_down"); u == nil || u["email"] != "down@example.com" {
		t.Errorf("user after the retry = %v", u)
	}
	if r := h.get("/readyz", ""); r.Code != http.StatusOK {
		t.Errorf("readyz after the outage = %s, want 200", r)
	}
}
