package main

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestOutboundOps_MeasureWithoutChangingWhatTheyMeasure: the outbound
// operations are measured on the seeded shape (a backlog, due deliveries,
// a few hundred outbox entries), every call finds what it expects, and the
// calls that write leave that shape as they found it, so a rerun on a kept
// database measures the same thing.
func TestOutboundOps_MeasureWithoutChangingWhatTheyMeasure(t *testing.T) {
	t.Chdir("../..") // the body template is read from the repository root
	ctx := context.Background()
	o := flags{sizes: "2000", deliveries: 2000, requests: 3, budget: time.Minute, batch: 500, workers: 2,
		only: regexp.MustCompile("outbound|endpoints")}
	sizes, err := o.parseSizes()
	if err != nil {
		t.Fatal(err)
	}
	s := sizes[0]
	b, err := newBench(ctx, o, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close(false)
	sd, err := b.seedTo(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if sd.deliveries != 2000 || sd.outbox != outboxSeed {
		t.Fatalf("seeded %d deliveries and %d outbox entries, want 2000 and %d", sd.deliveries, sd.outbox, outboxSeed)
	}
	shape := func() (pending int64, due, outbox int) {
		ob := b.store.Outbound()
		bl, err := ob.Backlog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := ob.Due(ctx, scaleEndpoint, time.Now(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		es, err := ob.Outbox(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return bl[scaleEndpoint].Pending, len(ds), len(es)
	}
	p0, d0, o0 := shape()
	if p0 != 20 || d0 != 10 || o0 != outboxSeed {
		t.Fatalf("seeded: %d pending, %d due, %d in the outbox; want 20, 10, %d", p0, d0, o0, outboxSeed)
	}
	rows, err := b.measure(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 12 {
		t.Errorf("measured %d operations, want the 12 of outbound webhooks", len(rows))
	}
	for _, r := range rows {
		if !strings.HasPrefix(r.name, "outbound: ") && !strings.HasPrefix(r.name, "GET /v1/endpoints") {
			t.Errorf("measured %q", r.name)
		}
		if len(r.lat) != o.requests || len(r.notes) > 0 {
			t.Errorf("%s: %d samples, results other than expected: %v %v", r.name, len(r.lat), r.notes, r.errs)
		}
	}
	if p, d, ob := shape(); p != p0 || d != d0 || ob != o0 {
		t.Errorf("after the measurements: %d pending, %d due, %d in the outbox; before: %d, %d, %d", p, d, ob, p0, d0, o0)
	}
	as, _, err := b.store.Outbound().Attempts(ctx, models.AttemptFilter{EndpointID: scaleEndpoint, Failed: true, Limit: 100})
	if err != nil || len(as) != 20 {
		t.Errorf("failed attempts: %d (%v), want one for each pending delivery, 20", len(as), err)
	}
}
