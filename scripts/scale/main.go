// Command scale measures webhook latency as the database grows: it seeds
// users and events directly through the driver, then sends signed webhooks
// (new users, updates, duplicates) to an in-process usersync and prints
// latency percentiles for each size.
//
//	go run ./scripts/scale [-sizes 1000,10000,50000] [-requests 30] [-mongodb-uri URI]
//
// With no -mongodb-uri it starts the embedded engine in a temporary
// directory. Loopback only; it stops by itself.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	stdsync "sync"
	"time"

	svix "github.com/svix/svix-webhooks/go"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/sync"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func main() {
	sizes := flag.String("sizes", "1000,10000,50000", "users (and as many events) present before each measurement")
	requests := flag.Int("requests", 30, "webhooks of each kind measured at each size")
	uri := flag.String("mongodb-uri", "", "measure against this MongoDB instead of the embedded engine")
	flag.Parse()
	if err := run(*sizes, *requests, *uri); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

func run(sizeList string, requests int, uri string) error {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if uri == "" {
		dir, err := os.MkdirTemp("", "usersync-scale-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		engine, err := repository.StartEmbedded(dir, "127.0.0.1:0", quiet)
		if err != nil {
			return err
		}
		defer engine.Stop()
		uri = engine.URI()
	}
	var engineTime commandTimer
	store, err := repository.Open(ctx, uri, fmt.Sprintf("usersync_scale_%d", time.Now().Unix()),
		repository.Options{Monitor: engineTime.monitor()})
	if err != nil {
		return err
	}
	defer func() {
		_ = store.Drop(ctx)
		_ = store.Close(ctx)
	}()
	ferret, err := store.Prepare(ctx) // as usersync does
	if err != nil {
		return err
	}
	handler, err := api.New(api.Config{
		Sync: sync.New(store.Events, store.Users, nil), Users: store.Users, Events: store.Events, DB: store, Logger: quiet,
		WebhookSecrets: []string{secret}, APIKeys: []string{"k"},
	})
	if err != nil {
		return err
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	wh, _ := svix.NewWebhook(secret)

	template, err := os.ReadFile("models/testdata/user.updated.json")
	if err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	fmt.Printf("%-8s %-10s %8s %8s %8s %8s %8s %10s %8s\n", "size", "webhook", "p50", "p95", "p99", "max", "req/s", "engine/req", "service")
	seeded, seq := 0, 0
	for _, f := range strings.Split(sizeList, ",") {
		size, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("size %q: %w", f, err)
		}
		start := time.Now()
		if err := seed(ctx, store.Database(), template, seeded, size, !ferret); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "seeded %d users and events in %s\n", size-seeded, time.Since(start).Round(time.Millisecond))
		seeded = size

		type sent struct {
			id   string
			body []byte
		}
		var lastUpdates []sent
		kinds := []struct {
			name string
			body func(i int) (id string, body []byte)
		}{
			{"create", func(i int) (string, []byte) {
				seq++
				return fmt.Sprintf("msg_new_%d", seq), userEvent(template, "user.created", fmt.Sprintf("user_new_%d", seq), time.Now().UnixMilli())
			}},
			{"update", func(i int) (string, []byte) {
				seq++
				id := fmt.Sprintf("msg_upd_%d", seq)
				body := userEvent(template, "user.updated", fmt.Sprintf("user_seed_%d", i*(size/requests)), time.Now().UnixMilli())
				lastUpdates = append(lastUpdates, sent{id, body})
				return id, body
			}},
			{"duplicate", func(i int) (string, []byte) {
				// A retry of one of the updates just sent, as Svix's come
				// soon after the first delivery.
				return lastUpdates[i%len(lastUpdates)].id, lastUpdates[i%len(lastUpdates)].body
			}},
		}
		for _, k := range kinds {
			var lat []time.Duration
			engineTime.reset()
			began := time.Now()
			for i := range requests {
				id, body := k.body(i)
				d, err := post(srv.URL, wh, id, body)
				if err != nil {
					return err
				}
				lat = append(lat, d)
			}
			total := time.Since(began)
			var sum time.Duration
			for _, d := range lat {
				sum += d
			}
			engine := engineTime.total()
			slices.Sort(lat)
			fmt.Printf("%-8d %-10s %8s %8s %8s %8s %8.1f %10s %7.1f%%\n", size, k.name,
				pct(lat, 50), pct(lat, 95), pct(lat, 99), lat[len(lat)-1].Round(time.Millisecond),
				float64(len(lat))/total.Seconds(), (engine / time.Duration(len(lat))).Round(time.Microsecond),
				100*float64(sum-engine)/float64(sum))
		}
	}
	return nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(i, 0)].Round(time.Millisecond)
}

func post(base string, wh *svix.Webhook, id string, body []byte) (time.Duration, error) {
	now := time.Now()
	sig, _ := wh.Sign(id, now, body)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/clerk", bytes.NewReader(body))
	req.Header.Set("svix-id", id)
	req.Header.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("svix-signature", sig)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("webhook %s: %d %s", id, resp.StatusCode, b)
	}
	return time.Since(start), nil
}

// userEvent is the user.updated fixture for another user and time.
func userEvent(template []byte, typ, userID string, updatedAt int64) []byte {
	var env map[string]any
	_ = json.Unmarshal(template, &env)
	env["type"] = typ
	d := env["data"].(map[string]any)
	d["id"] = userID
	d["updated_at"] = updatedAt
	for i, e := range d["email_addresses"].([]any) {
		e.(map[string]any)["email_address"] = fmt.Sprintf("%s.%d@example.com", userID, i)
	}
	b, _ := json.Marshal(env)
	return b
}

// seed inserts users [from, to) and as many processed events, shaped as
// usersync writes them.
func seed(ctx context.Context, db *mongo.Database, template []byte, from, to int, payloadDocs bool) error {
	const batch = 1000
	now := time.Now().UTC()
	for lo := from; lo < to; lo += batch {
		var users, events []any
		for i := lo; i < min(lo+batch, to); i++ {
			uid := fmt.Sprintf("user_seed_%d", i)
			users = append(users, bson.D{
				{Key: "userId", Value: uid}, {Key: "email", Value: uid + "@example.com"},
				{Key: "displayName", Value: "Seed " + strconv.Itoa(i)}, {Key: "metadata", Value: bson.D{}},
				{Key: "createdAt", Value: now}, {Key: "updatedAt", Value: now}, {Key: "deletedAt", Value: nil},
				{Key: "sourceUpdatedAt", Value: time.UnixMilli(1000)}, {Key: "lastEventId", Value: "msg_seed_" + strconv.Itoa(i)},
			})
			body := userEvent(template, "user.updated", uid, 1000)
			ev := bson.D{
				{Key: "eventId", Value: "msg_seed_" + strconv.Itoa(i)}, {Key: "type", Value: "user.updated"},
				{Key: "eventType", Value: "updated"}, {Key: "userId", Value: uid},
				{Key: "rawBody", Value: string(body)}, {Key: "source", Value: "clerk"}, {Key: "signature", Value: "v1,seed"},
				{Key: "signatureValid", Value: true}, {Key: "sourceTimestamp", Value: time.UnixMilli(1000)},
				{Key: "receivedAt", Value: now}, {Key: "processedAt", Value: now}, {Key: "status", Value: "processed"},
				{Key: "outcome", Value: "applied"}, {Key: "attempts", Value: 1},
			}
			if payloadDocs {
				var payload bson.D
				_ = bson.UnmarshalExtJSON(body, false, &payload)
				ev = append(ev, bson.E{Key: "payload", Value: payload})
			}
			events = append(events, ev)
		}
		if _, err := db.Collection(repository.UsersCollection).InsertMany(ctx, users); err != nil {
			return fmt.Errorf("seed users: %w", err)
		}
		if _, err := db.Collection(repository.EventsCollection).InsertMany(ctx, events); err != nil {
			return fmt.Errorf("seed events: %w", err)
		}
	}
	return nil
}

// commandTimer adds up the time the engine took to answer commands, as the
// driver saw it: the rest of a webhook's latency is the service's own.
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
	c.mu.Lock()
	c.sum = 0
	c.mu.Unlock()
}

func (c *commandTimer) total() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sum
}
