package sync_test

import (
	"context"
	"errors"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/sync"
)

// memActivity is an ActivityStore in memory that can be made to fail.
type memActivity struct {
	mu     stdsync.Mutex
	counts map[time.Time]map[string]int64
	writes int
	fail   error
}

func (m *memActivity) Add(_ context.Context, at time.Time, kind string, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	m.writes++
	if m.counts == nil {
		m.counts = map[time.Time]map[string]int64{}
	}
	if m.counts[at] == nil {
		m.counts[at] = map[string]int64{}
	}
	m.counts[at][kind] += n
	return nil
}

func TestActivity_CountsPerMinuteAndFlushesOneWritePerMinuteAndKind(t *testing.T) {
	ctx := context.Background()
	m0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now := m0.Add(5 * time.Second)
	store := &memActivity{}
	a := sync.NewActivity(store, func() time.Time { return now })
	for range 3 {
		a.Note(models.ActivityReceived)
	}
	a.Note(models.ActivityApplied)
	now = m0.Add(time.Minute + time.Second)
	a.Note(models.ActivityReceived)

	store.fail = errors.New("database down")
	if err := a.Flush(ctx); err == nil {
		t.Fatal("Flush with the store down = nil, want its error")
	}
	store.fail = nil
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if store.writes != 3 {
		t.Errorf("flush made %d writes, want 3 (two kinds in the first minute, one in the second)", store.writes)
	}
	if got := store.counts[m0]; got["received"] != 3 || got["applied"] != 1 {
		t.Errorf("first minute = %v, want received 3, applied 1", got)
	}
	if got := store.counts[m0.Add(time.Minute)]; got["received"] != 1 {
		t.Errorf("second minute = %v, want received 1", got)
	}
	if err := a.Flush(ctx); err != nil || store.writes != 3 {
		t.Errorf("an empty flush wrote: %d writes, %v", store.writes, err)
	}
	var none *sync.Activity
	none.Note(models.ActivityReceived) // counts nothing, does not panic
}

func TestService_CountsWhatItReceivesAndEveryOutcome(t *testing.T) {
	ctx := context.Background()
	st := repotest.NewStore(t)
	mem := &memActivity{}
	m0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	act := sync.NewActivity(mem, func() time.Time { return m0 })
	svc := sync.New(st.Events(), st, nil)
	svc.SetActivity(act)

	ev, err := models.DecodeEvent([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is a duplicate delivery: neither received nor processed again
		if _, err := svc.Ingest(ctx, sync.Delivery{EventID: "msg_act", Body: []byte(body), Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	bad := []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`)
	bev, err := models.DecodeEvent(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Ingest(ctx, sync.Delivery{EventID: "msg_bad", Body: bad, Event: bev}); !errors.Is(err, models.ErrInvalid) {
		t.Fatalf("Ingest of an invalid payload = %v", err)
	}
	if err := act.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"received": 2, "applied": 1, "failed": 1}
	got := mem.counts[m0]
	if len(got) != len(want) || got["received"] != 2 || got["applied"] != 1 || got["failed"] != 1 {
		t.Errorf("counts = %v, want %v", got, want)
	}
}
