package mongo

import (
	"fmt"
	"testing"
)

// TestDensities_RememberABoundedNumberOfKinds: a kind of walk may come
// from a request (a subscriptions' status filter), so the hints keep at
// most maxHintKinds kinds, and still update the ones they hold.
func TestDensities_RememberABoundedNumberOfKinds(t *testing.T) {
	var d densities
	for i := range maxHintKinds + 50 {
		kind := fmt.Sprintf("subs:status_%d", i)
		d.note(kind, 10, 100)
		d.noteEdge(kind, uint64(i))
		d.noteFew(kind, true)
	}
	if len(d.m) != maxHintKinds || len(d.edges) != maxHintKinds || len(d.fewKinds) != maxHintKinds {
		t.Fatalf("densities hold %d, %d, %d kinds; want at most %d each", len(d.m), len(d.edges), len(d.fewKinds), maxHintKinds)
	}
	if _, ok := d.get(fmt.Sprintf("subs:status_%d", maxHintKinds)); ok {
		t.Error("a kind past the bound was remembered")
	}
	d.note("subs:status_0", 30, 100)
	if got, _ := d.get("subs:status_0"); got != 0.2 {
		t.Errorf("a kind held is no longer updated: density %v, want 0.2", got)
	}
}
