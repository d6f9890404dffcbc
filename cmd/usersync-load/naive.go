package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// The naive handler is the yardstick of the baseline (-baseline): what a
// hand-written webhook endpoint does, and nothing more. It verifies the
// Svix signature of the raw body, decodes the user, and writes it with one
// upsert by user id. It keeps no event log, no order (an older state that
// arrives later overwrites a newer one), no deduplication (a second
// delivery is written again) and no deletion; its writes have the write
// concern the URI sets, else the server's default. It answers the two
// reads the load makes, a user by id and a page of users by id, so that
// the same load runs against it.

// Bounds of the naive handler's requests.
const (
	naiveMaxBody    = 256 << 10 // as usersync's webhook (api.MaxWebhookBody)
	naiveMaxID      = 128       // a user id or a list cursor
	naiveMaxField   = 1024      // an email address or a name
	naiveOpTimeout  = 10 * time.Second
	naiveMaxLimit   = maxPageSize
	naiveLimitFirst = 50
)

// naiveHandler serves the webhook and the reads of the naive baseline.
type naiveHandler struct {
	hook   *svix.Webhook
	apiKey string
	users  *mongo.Collection
}

// newNaiveHandler returns the naive handler's routes: POST /webhooks/clerk
// signed with secret, and GET /v1/users/{userId} and GET /v1/users with
// the bearer key apiKey. It writes to and reads users.
func newNaiveHandler(secret, apiKey string, users *mongo.Collection) (http.Handler, error) {
	hook, err := svix.NewWebhook(secret)
	if err != nil {
		return nil, fmt.Errorf("%w: webhook secret is not a whsec_ base64 secret: %v", errUsage, err)
	}
	if apiKey == "" {
		return nil, fmt.Errorf("%w: no API key", errUsage)
	}
	h := &naiveHandler{hook: hook, apiKey: apiKey, users: users}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhooks/clerk", h.webhook)
	mux.HandleFunc("GET /v1/users/{userId}", h.getUser)
	mux.HandleFunc("GET /v1/users", h.listUsers)
	return mux, nil
}

// naiveUser is what the naive handler keeps of a user: its document in
// the users collection.
type naiveUser struct {
	ID        string    `bson:"_id"`
	Email     string    `bson:"email"`
	FirstName string    `bson:"firstName"`
	LastName  string    `bson:"lastName"`
	UpdatedAt time.Time `bson:"updatedAt"` // Clerk's updated_at
}

// naiveEvent is the part of a Clerk user event the naive handler reads.
type naiveEvent struct {
	Type string `json:"type"`
	Data struct {
		ID                    string  `json:"id"`
		FirstName             *string `json:"first_name"`
		LastName              *string `json:"last_name"`
		PrimaryEmailAddressID *string `json:"primary_email_address_id"`
		EmailAddresses        []struct {
			ID           string `json:"id"`
			EmailAddress string `json:"email_address"`
		} `json:"email_addresses"`
		UpdatedAt int64 `json:"updated_at"` // Unix milliseconds
	} `json:"data"`
}

// errNaiveBody is a body the naive handler cannot use.
var errNaiveBody = errors.New("bad event")

// decodeNaive reads a Clerk event. upsert is false for a type the naive
// handler ignores (anything but user.created and user.updated); then u is
// empty.
func decodeNaive(body []byte) (u naiveUser, upsert bool, err error) {
	var ev naiveEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return naiveUser{}, false, fmt.Errorf("%w: %v", errNaiveBody, err)
	}
	switch ev.Type {
	case "user.created", "user.updated":
	case "":
		return naiveUser{}, false, fmt.Errorf("%w: no type", errNaiveBody)
	default:
		return naiveUser{}, false, nil
	}
	d := ev.Data
	if d.ID == "" || len(d.ID) > naiveMaxID {
		return naiveUser{}, false, fmt.Errorf("%w: data.id must be 1 to %d bytes", errNaiveBody, naiveMaxID)
	}
	u = naiveUser{ID: d.ID, FirstName: deref(d.FirstName), LastName: deref(d.LastName), UpdatedAt: time.UnixMilli(d.UpdatedAt).UTC()}
	for i, e := range d.EmailAddresses {
		if i == 0 || (d.PrimaryEmailAddressID != nil && e.ID == *d.PrimaryEmailAddressID) {
			u.Email = strings.ToLower(e.EmailAddress)
		}
	}
	if len(u.Email) > naiveMaxField || len(u.FirstName) > naiveMaxField || len(u.LastName) > naiveMaxField {
		return naiveUser{}, false, fmt.Errorf("%w: an email address or name is longer than %d bytes", errNaiveBody, naiveMaxField)
	}
	return u, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// webhook verifies a delivery, decodes it and upserts its user.
func (h *naiveHandler) webhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, naiveMaxBody))
	if err != nil {
		code := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			code = http.StatusRequestEntityTooLarge
		}
		naiveError(w, code, "body: "+err.Error())
		return
	}
	if err := h.hook.Verify(body, r.Header); err != nil {
		naiveError(w, http.StatusUnauthorized, "signature: "+err.Error())
		return
	}
	u, upsert, err := decodeNaive(body)
	if err != nil {
		naiveError(w, http.StatusBadRequest, err.Error())
		return
	}
	if upsert {
		ctx, cancel := context.WithTimeout(r.Context(), naiveOpTimeout)
		defer cancel()
		set := bson.D{
			{Key: "email", Value: u.Email}, {Key: "firstName", Value: u.FirstName},
			{Key: "lastName", Value: u.LastName}, {Key: "updatedAt", Value: u.UpdatedAt},
		}
		_, err := h.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: u.ID}}, bson.D{{Key: "$set", Value: set}},
			options.UpdateOne().SetUpsert(true))
		if err != nil {
			naiveError(w, http.StatusInternalServerError, "database: "+err.Error())
			return
		}
	}
	naiveJSON(w, http.StatusOK, map[string]any{"received": true, "ignored": !upsert})
}

// naiveAPIUser is a user as the naive handler's reads answer it, in the
// field names of usersync's API that the load reads.
type naiveAPIUser struct {
	UserID      string    `json:"userId"`
	Email       string    `json:"email"`
	FirstName   string    `json:"firstName"`
	LastName    string    `json:"lastName"`
	DisplayName string    `json:"displayName"`
	UpdatedAt   time.Time `json:"updatedAt"`
}

func (u naiveUser) api() naiveAPIUser {
	return naiveAPIUser{
		UserID: u.ID, Email: u.Email, FirstName: u.FirstName, LastName: u.LastName,
		DisplayName: strings.TrimSpace(u.FirstName + " " + u.LastName), UpdatedAt: u.UpdatedAt,
	}
}

// authorized checks the bearer key of a read, and answers 401 if it is not
// the key.
func (h *naiveHandler) authorized(w http.ResponseWriter, r *http.Request) bool {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(h.apiKey)) != 1 {
		naiveError(w, http.StatusUnauthorized, "a valid API key is required")
		return false
	}
	return true
}

// getUser answers GET /v1/users/{userId}.
func (h *naiveHandler) getUser(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(w, r) {
		return
	}
	id := r.PathValue("userId")
	if id == "" || len(id) > naiveMaxID {
		naiveError(w, http.StatusBadRequest, fmt.Sprintf("userId must be 1 to %d bytes", naiveMaxID))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), naiveOpTimeout)
	defer cancel()
	var u naiveUser
	err := h.users.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&u)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		naiveError(w, http.StatusNotFound, "no such user")
	case err != nil:
		naiveError(w, http.StatusInternalServerError, "database: "+err.Error())
	default:
		naiveJSON(w, http.StatusOK, u.api())
	}
}

// listUsers answers GET /v1/users?limit=&cursor=: users in the order of
// their ids, after the id cursor.
func (h *naiveHandler) listUsers(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(w, r) {
		return
	}
	q := r.URL.Query()
	limit := naiveLimitFirst
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > naiveMaxLimit {
			naiveError(w, http.StatusBadRequest, fmt.Sprintf("limit must be 1 to %d", naiveMaxLimit))
			return
		}
		limit = n
	}
	cursor := q.Get("cursor")
	if len(cursor) > naiveMaxID {
		naiveError(w, http.StatusBadRequest, fmt.Sprintf("cursor must be at most %d bytes", naiveMaxID))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), naiveOpTimeout)
	defer cancel()
	filter := bson.D{}
	if cursor != "" {
		filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: cursor}}}}
	}
	cur, err := h.users.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)+1))
	if err != nil {
		naiveError(w, http.StatusInternalServerError, "database: "+err.Error())
		return
	}
	var users []naiveUser
	if err := cur.All(ctx, &users); err != nil {
		naiveError(w, http.StatusInternalServerError, "database: "+err.Error())
		return
	}
	page := struct {
		Data       []naiveAPIUser `json:"data"`
		NextCursor *string        `json:"nextCursor"`
	}{Data: []naiveAPIUser{}}
	for i, u := range users {
		if i == limit {
			next := users[limit-1].ID
			page.NextCursor = &next
			break
		}
		page.Data = append(page.Data, u.api())
	}
	naiveJSON(w, http.StatusOK, page)
}

func naiveJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone
}

func naiveError(w http.ResponseWriter, code int, msg string) {
	naiveJSON(w, code, map[string]string{"message": msg})
}

// naiveDBPrefix starts the name of every database the baseline creates.
const naiveDBPrefix = "usersync_load_naive_"

// naiveStartTimeout bounds connecting to MongoDB, and dropping the
// database at the end.
const naiveStartTimeout = 30 * time.Second

// naiveServer is the naive handler serving on a loopback port, on a
// database of its own.
type naiveServer struct {
	URL      string // http://127.0.0.1:port
	Database string // the fresh database's name
	client   *mongo.Client
	srv      *http.Server
	served   chan error
}

// checkMongoURI refuses a -baseline value that is not a MongoDB URI. The
// URI may name any host: the HTTP targets, not the database, are what this
// program floods.
func checkMongoURI(uri string) error {
	if !strings.HasPrefix(uri, "mongodb://") && !strings.HasPrefix(uri, "mongodb+srv://") {
		return fmt.Errorf("%w: -baseline must be a mongodb:// or mongodb+srv:// URI", errUsage)
	}
	if err := options.Client().ApplyURI(uri).Validate(); err != nil {
		return fmt.Errorf("%w: -baseline %s: %v", errUsage, redactURI(uri), err)
	}
	return nil
}

// redactURI hides the credentials of a MongoDB URI.
func redactURI(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "the MongoDB URI"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "REDACTED@" + rest[at+1:]
	}
	return scheme + "://" + rest
}

// startNaive connects to the MongoDB at uri, picks a database name no one
// uses, and serves the naive handler on a loopback port. Close stops it
// and drops the database.
func startNaive(ctx context.Context, uri, secret, apiKey string) (*naiveServer, error) {
	if err := checkMongoURI(uri); err != nil {
		return nil, err
	}
	opts := options.Client().ApplyURI(uri)
	if opts.ServerSelectionTimeout == nil {
		opts.SetServerSelectionTimeout(5 * time.Second)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("baseline: connect to %s: %w", redactURI(uri), err)
	}
	s := &naiveServer{client: client, served: make(chan error, 1)}
	fail := func(err error) (*naiveServer, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), naiveStartTimeout)
		defer cancel()
		_ = client.Disconnect(ctx)
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, naiveStartTimeout)
	defer cancel()
	if err := client.Ping(cctx, nil); err != nil {
		return fail(fmt.Errorf("baseline: MongoDB at %s does not answer: %w", redactURI(uri), err))
	}
	s.Database = naiveDBPrefix + randomHex(6)
	names, err := client.ListDatabaseNames(cctx, bson.D{{Key: "name", Value: s.Database}})
	switch {
	case err != nil:
		return fail(fmt.Errorf("baseline: list databases: %w", err))
	case len(names) > 0: // never drop a database this run did not create
		return fail(fmt.Errorf("baseline: database %s exists already", s.Database))
	}
	h, err := newNaiveHandler(secret, apiKey, client.Database(s.Database).Collection("users"))
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("baseline: listen: %w", err))
	}
	s.URL = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	go func() { s.served <- s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server, drops the database and disconnects; it reports
// the first error.
func (s *naiveServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), naiveStartTimeout)
	defer cancel()
	errs := []error{s.srv.Shutdown(ctx)}
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	if err := s.client.Database(s.Database).Drop(ctx); err != nil {
		errs = append(errs, fmt.Errorf("baseline: drop database %s: %w", s.Database, err))
	}
	errs = append(errs, s.client.Disconnect(ctx))
	return errors.Join(errs...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
