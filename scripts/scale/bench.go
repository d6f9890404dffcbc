package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	stdsync "sync"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/internal/service"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/sqlite"
	"github.com/usersync/usersync/sync"
)

const (
	secret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	apiKey   = "usk_scale_api"
	adminKey = "usk_scale_admin"
)

// epoch is the Clerk time of the seeded states and the arrival time of the
// seeded events: in the past, so that every webhook the measurement sends
// is newer, and fixed, so that a rerun on a kept database agrees with it.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// retention is set so that the cutoff falls between the seeded events
// (received from epoch on) and the old ones a retention pass is given.
func retention() time.Duration { return time.Since(epoch.Add(-24 * time.Hour)) }

// store is what the program uses of the store it measures.
type store interface {
	repository.Store
	repository.Seeder
}

// bench is one usersync, in process, over the database being measured.
type bench struct {
	store    store
	srv      *httptest.Server
	client   *http.Client
	wh       *svix.Webhook
	rec      *sync.Recovery
	db       *commandTimer // nil: the store's time is not measured apart (embedded)
	body     bodyTemplate
	run      string // tells this run's new ids from those of earlier runs
	seq      int
	changeAt time.Time // the Clerk time of the last change the outbound seeding recorded
	o        flags
	progress io.Writer
}

// openStore opens the store to measure: MongoDB at -mongodb-uri, prepared
// with every index (as usersync migrate leaves it), or the embedded store
// in dir.
func openStore(ctx context.Context, o flags, dir string, timer *commandTimer) (store, error) {
	if o.uri == "" {
		return sqlite.Open(ctx, dir, sqlite.Options{})
	}
	s, err := mongo.Open(ctx, o.uri, o.database, mongo.Options{
		ServerSelectionTimeout: 10 * time.Second, OperationTimeout: o.opTimeout, Monitor: timer.monitor(),
	})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // index builds on a kept database
	defer cancel()
	if err = s.Prepare(pctx); err == nil {
		err = s.EnsureIndexes(pctx)
	}
	if err != nil {
		_ = s.Close(ctx)
		return nil, err
	}
	return s, nil
}

func newBench(ctx context.Context, o flags, dir string, quiet *slog.Logger, progress io.Writer) (*bench, error) {
	b := &bench{o: o, progress: progress, run: strconv.FormatInt(time.Now().UnixNano(), 36)}
	if o.uri != "" {
		b.db = new(commandTimer)
	}
	var err error
	if b.body, err = newBodyTemplate("models/testdata/user.updated.json"); err != nil {
		return nil, fmt.Errorf("run from the repository root: %w", err)
	}
	if b.store, err = openStore(ctx, o, dir, b.db); err != nil {
		return nil, err
	}
	metrics := api.NewMetrics(b.store.Events())
	// Outbound webhooks as serve wires them, for the endpoints routes; the
	// dispatcher is never run (nothing is sent), and the outbox records
	// only what the seeding of -deliveries delivers (see seedOutbound).
	svc := service.Sync(b.store, service.Options{})
	_, ob := service.Outbound(b.store, svc, service.OutboundOptions{Owner: "scale", Log: quiet})
	handler, err := api.New(service.API(b.store, svc, api.Config{
		Logger: quiet, Metrics: metrics,
		WebhookSecrets: []string{secret}, APIKeys: []string{apiKey}, AdminKeys: []string{adminKey},
		Outbound: ob,
	}))
	if err != nil {
		_ = b.store.Close(ctx)
		return nil, err
	}
	b.rec = &sync.Recovery{
		Service: svc, Store: b.store.Events(), Log: quiet, Grace: time.Minute,
		Retention: retention(), Observe: metrics.ObserveRecovery,
	}
	b.srv = httptest.NewServer(handler)
	b.client = &http.Client{Timeout: 30 * time.Minute}
	b.wh, _ = svix.NewWebhook(secret)
	return b, nil
}

// close stops the server and, unless keep, drops the MongoDB database (the
// embedded store's directory is removed by run).
func (b *bench) close(keep bool) {
	b.srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if m, ok := b.store.(*mongo.Store); ok && !keep {
		_ = m.Drop(ctx)
	}
	_ = b.store.Close(ctx)
}

// bodyTemplate makes Clerk user event bodies from the user.updated fixture
// for any user, type and time, without a JSON round trip for each.
type bodyTemplate []byte

const (
	uidMark  = "USERSYNCSCALEUID"
	typeMark = "USERSYNCSCALETYPE"
	timeMark = "4242424242424"
)

func newBodyTemplate(path string) (bodyTemplate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, err
	}
	env["type"] = typeMark
	d := env["data"].(map[string]any)
	d["id"] = uidMark
	d["updated_at"] = json.Number(timeMark)
	for i, e := range d["email_addresses"].([]any) {
		e.(map[string]any)["email_address"] = fmt.Sprintf("%s.%d@example.com", uidMark, i)
	}
	return json.Marshal(env)
}

// make returns the body of a typ event ("user.created", "user.updated")
// for userID at Clerk time updatedAt. The user's primary email is
// userID.1@example.com.
func (t bodyTemplate) make(typ, userID string, updatedAt time.Time) []byte {
	b := bytes.ReplaceAll(t, []byte(uidMark), []byte(userID))
	b = bytes.Replace(b, []byte(typeMark), []byte(typ), 1)
	return bytes.Replace(b, []byte(timeMark), strconv.AppendInt(nil, updatedAt.UnixMilli(), 10), 1)
}

func primaryEmail(userID string) string { return userID + ".1@example.com" }

// commandTimer adds up the time the database took to answer commands, as
// the driver saw it.
type commandTimer struct {
	mu  stdsync.Mutex
	sum time.Duration
}

func (c *commandTimer) monitor() *event.CommandMonitor {
	add := func(d time.Duration) {
		c.mu.Lock()
		c.sum += d
		c.mu.Unlock()
	}
	return &event.CommandMonitor{
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) { add(e.Duration) },
		Failed:    func(_ context.Context, e *event.CommandFailedEvent) { add(e.Duration) },
	}
}

func (c *commandTimer) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.sum = 0
	c.mu.Unlock()
}

// total is the time added up since reset; -1 without a timer.
func (c *commandTimer) total() time.Duration {
	if c == nil {
		return -1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum
}
