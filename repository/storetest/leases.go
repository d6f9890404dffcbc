package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/usersync/usersync/repository"
)

func testLeases(t *testing.T, s repository.Store) {
	ctx := context.Background()
	l := s.Leases()
	if ok, err := l.Acquire(ctx, "reconcile", "a", t0, t0.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("first Acquire = %v, %v", ok, err)
	}
	if ok, _ := l.Acquire(ctx, "reconcile", "b", t0.Add(30*time.Second), t0.Add(2*time.Minute)); ok {
		t.Error("a held lease was taken")
	}
	if ok, _ := l.Extend(ctx, "reconcile", "b", t0.Add(time.Hour)); ok {
		t.Error("a lease was extended by another owner")
	}
	if ok, _ := l.Extend(ctx, "reconcile", "a", t0.Add(2*time.Minute)); !ok {
		t.Error("the owner cannot extend its lease")
	}
	if ok, _ := l.Acquire(ctx, "reconcile", "b", t0.Add(time.Minute+30*time.Second), t0.Add(time.Hour)); ok {
		t.Error("an extended lease was taken before its new expiry")
	}
	if ok, _ := l.Acquire(ctx, "reconcile", "b", t0.Add(3*time.Minute), t0.Add(time.Hour)); !ok {
		t.Error("an expired lease cannot be taken")
	}
	if ok, _ := l.Acquire(ctx, "other", "a", t0, t0.Add(time.Minute)); !ok {
		t.Error("leases of other names are not independent")
	}
	// A lease set further ahead than any schedule would is stale.
	if ok, _ := l.Reclaim(ctx, "reconcile", "c", t0.Add(2*time.Hour), t0.Add(4*time.Minute)); ok {
		t.Error("a lease within the horizon was reclaimed")
	}
	if ok, _ := l.Reclaim(ctx, "reconcile", "c", t0.Add(30*time.Minute), t0.Add(4*time.Minute)); !ok {
		t.Error("a lease beyond the horizon was not reclaimed")
	}
	if ok, _ := l.Extend(ctx, "reconcile", "c", t0.Add(5*time.Minute)); !ok {
		t.Error("the owner that reclaimed a lease does not hold it")
	}
}

// testLeaseRelease: a lease its owner released is free at once; another
// owner cannot release it.
func testLeaseRelease(t *testing.T, s repository.Store) {
	ctx := context.Background()
	l := s.Leases()
	if ok, err := l.Acquire(ctx, "outbound", "a", t0, t0.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("Acquire = %v, %v", ok, err)
	}
	if err := l.Release(ctx, "outbound", "b"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := l.Acquire(ctx, "outbound", "b", t0.Add(time.Second), t0.Add(time.Minute)); ok {
		t.Error("a lease released by another owner was taken")
	}
	if err := l.Release(ctx, "outbound", "a"); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Acquire(ctx, "outbound", "b", t0.Add(time.Second), t0.Add(time.Minute)); !ok || err != nil {
		t.Errorf("a released lease = %v, %v; want it taken at once", ok, err)
	}
	if err := l.Release(ctx, "never", "a"); err != nil {
		t.Errorf("releasing a lease never taken = %v", err)
	}
}
