package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// events builds Clerk user events from the template, as a run does.
func events(t *testing.T) *runner {
	t.Helper()
	r := &runner{cfg: Config{RunID: "naive1", Updates: 3}, t0: time.Now().UnixMilli()}
	if err := r.parseTemplate(config(t, "").Template); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *runner) mustBody(t *testing.T, user, version int) []byte {
	t.Helper()
	b, err := r.body(event{user: user, version: version})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signed is a webhook request of body, signed with secret as Svix signs.
func signed(t *testing.T, url, secret string, body []byte) *http.Request {
	t.Helper()
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	id := "msg_naive_" + strconv.Itoa(len(body))
	now := time.Now()
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, url+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	return req
}

// offlineHandler is the naive handler on a client that is disconnected:
// any database call fails at once, so an answer other than 5xx shows the
// handler decided without the database.
func offlineHandler(t *testing.T) http.Handler {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI("mongodb://127.0.0.1:1/?directConnection=true"))
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Disconnect(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := newNaiveHandler(testSecret, testAPIKey, client.Database("unused").Collection("users"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestNaive_RefusesWhatItCannotVerifyOrUseBeforeTheDatabase(t *testing.T) {
	h := offlineHandler(t)
	ev := events(t)
	good := ev.mustBody(t, 1, 0)
	longEmail := bytes.Replace(good, []byte(`"email_address":"`), []byte(`"email_address":"`+strings.Repeat("a", naiveMaxField)), 1)
	tests := []struct {
		name string
		req  *http.Request
		want int
	}{
		{"signed with another secret", signed(t, "", "whsec_"+strings.Repeat("A", 32), good), http.StatusUnauthorized},
		{"no signature", func() *http.Request {
			r := signed(t, "", testSecret, good)
			r.Header.Del("svix-signature")
			return r
		}(), http.StatusUnauthorized},
		{"body changed after signing", func() *http.Request {
			r := signed(t, "", testSecret, good)
			r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(good, []byte("Load"), []byte("Lode"), 1)))
			return r
		}(), http.StatusUnauthorized},
		{"too large", signed(t, "", testSecret, bytes.Repeat([]byte(" "), naiveMaxBody+1)), http.StatusRequestEntityTooLarge},
		{"not JSON", signed(t, "", testSecret, []byte("{")), http.StatusBadRequest},
		{"no type", signed(t, "", testSecret, []byte(`{"data":{"id":"user_1"}}`)), http.StatusBadRequest},
		{"no user id", signed(t, "", testSecret, []byte(`{"type":"user.created","data":{}}`)), http.StatusBadRequest},
		{"user id too long", signed(t, "", testSecret, []byte(`{"type":"user.updated","data":{"id":"`+strings.Repeat("u", naiveMaxID+1)+`"}}`)), http.StatusBadRequest},
		{"email too long", signed(t, "", testSecret, longEmail), http.StatusBadRequest},
		{"a type it ignores", signed(t, "", testSecret, []byte(`{"type":"organization.created","data":{"id":"org_1"}}`)), http.StatusOK},
		{"a read without the key", httptest.NewRequest(http.MethodGet, "/v1/users/user_1", nil), http.StatusUnauthorized},
		{"a page without the key", httptest.NewRequest(http.MethodGet, "/v1/users?limit=5", nil), http.StatusUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, tc.req)
			if rec.Code != tc.want {
				t.Errorf("answered %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

func TestNaive_ADatabaseErrorIs5xx(t *testing.T) {
	h := offlineHandler(t)
	ev := events(t)
	reads := []*http.Request{
		httptest.NewRequest(http.MethodGet, "/v1/users/user_1", nil),
		httptest.NewRequest(http.MethodGet, "/v1/users?limit=5&cursor=user_0", nil),
	}
	for _, r := range reads {
		r.Header.Set("Authorization", "Bearer "+testAPIKey)
	}
	for _, req := range append([]*http.Request{signed(t, "", testSecret, ev.mustBody(t, 1, 0))}, reads...) {
		if rec := serve(h, req); rec.Code != http.StatusInternalServerError {
			t.Errorf("%s %s with the database gone answered %d %s, want 500", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
}

func TestNaive_KeepsTheUsersIDPrimaryEmailNamesAndTime(t *testing.T) {
	ev := events(t)
	b := ev.mustBody(t, 7, 2)
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	// The primary address is not the first one of the list.
	data := env["data"].(map[string]any)
	emails := data["email_addresses"].([]any)
	emails[0], emails[1] = emails[1], emails[0]
	emails[1].(map[string]any)["email_address"] = "Primary.Person@Example.com"
	b, _ = json.Marshal(env)

	u, upsert, err := decodeNaive(b)
	if err != nil || !upsert {
		t.Fatalf("decodeNaive = %v, %t, want an upsert", err, upsert)
	}
	want := naiveUser{ID: ev.userID(7), Email: "primary.person@example.com", FirstName: "Load", LastName: "u7 v2",
		UpdatedAt: time.UnixMilli(ev.t0 + 2000).UTC()}
	if u != want {
		t.Errorf("decodeNaive = %+v, want %+v", u, want)
	}
	if got := u.api().DisplayName; got != displayName(7, 2) {
		t.Errorf("display name %q, want %q", got, displayName(7, 2))
	}
	if _, upsert, err := decodeNaive([]byte(`{"type":"user.deleted","data":{"id":"user_1","deleted":true}}`)); err != nil || upsert {
		t.Errorf("user.deleted = %v, upsert %t; want ignored", err, upsert)
	}
}

// startNaiveForTest serves the naive handler on a fresh database at
// MONGODB_URI, or skips.
func startNaiveForTest(t *testing.T) *naiveServer {
	t.Helper()
	uri := mongotest.URI(t)
	s, err := startNaive(context.Background(), uri, testSecret, testAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.srv != nil {
			_ = s.Close()
		}
	})
	return s
}

func naivePost(t *testing.T, s *naiveServer, body []byte) {
	t.Helper()
	req := signed(t, s.URL, testSecret, body)
	req.RequestURI = ""
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("webhook answered %d %s", res.StatusCode, b)
	}
}

func naiveGet(t *testing.T, s *naiveServer, path string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK {
		if err := json.NewDecoder(res.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	return res.StatusCode
}

func TestNaive_UpsertsEachUserByIDAndServesTheLoadsReads(t *testing.T) {
	s := startNaiveForTest(t)
	ev := events(t)
	for n := range 3 {
		naivePost(t, s, ev.mustBody(t, n, 0))
	}
	naivePost(t, s, ev.mustBody(t, 1, 1))

	var u apiUser
	if code := naiveGet(t, s, "/v1/users/"+ev.userID(1), &u); code != http.StatusOK {
		t.Fatalf("GET user 1 answered %d", code)
	}
	if v, ok := ev.version(1, u); !ok || v != 1 {
		t.Errorf("user 1 = %+v, want version 1", u)
	}
	if code := naiveGet(t, s, "/v1/users/"+ev.userID(9), &u); code != http.StatusNotFound {
		t.Errorf("GET of a user never sent answered %d, want 404", code)
	}
	var ids []string
	cursor := ""
	for range 4 {
		var p usersPage
		if code := naiveGet(t, s, listPath(2, cursor), &p); code != http.StatusOK {
			t.Fatalf("page after %q answered %d", cursor, code)
		}
		for _, u := range p.Data {
			ids = append(ids, u.UserID)
		}
		if p.NextCursor == nil {
			break
		}
		cursor = *p.NextCursor
	}
	if want := []string{ev.userID(0), ev.userID(1), ev.userID(2)}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("pages of 2 listed %q, want %q", ids, want)
	}
}

// The naive handler keeps no order: this is what the baseline leaves out.
func TestNaive_AnOlderStateDeliveredLaterOverwritesTheNewerOne(t *testing.T) {
	s := startNaiveForTest(t)
	ev := events(t)
	naivePost(t, s, ev.mustBody(t, 0, 2))
	naivePost(t, s, ev.mustBody(t, 0, 1))
	var u apiUser
	if code := naiveGet(t, s, "/v1/users/"+ev.userID(0), &u); code != http.StatusOK {
		t.Fatalf("GET answered %d", code)
	}
	if v, _ := ev.version(0, u); v != 1 {
		t.Errorf("user shows v%d after v2 then v1, want v1 (the naive handler writes whatever comes last)", v)
	}
}

func TestNaive_CloseDropsItsDatabase(t *testing.T) {
	s := startNaiveForTest(t)
	naivePost(t, s, events(t).mustBody(t, 0, 0))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s.srv = nil // closed
	if dropped(t, s.Database) != true {
		t.Errorf("database %s is still there after Close", s.Database)
	}
}

// dropped reports whether the database name is gone from MONGODB_URI's
// server.
func dropped(t *testing.T, name string) bool {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(mongotest.URI(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	names, err := client.ListDatabaseNames(context.Background(), bson.D{{Key: "name", Value: name}})
	if err != nil {
		t.Fatal(err)
	}
	return len(names) == 0
}
