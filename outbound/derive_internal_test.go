package outbound

import (
	"testing"

	"github.com/usersync/usersync/models"
)

// TestDerivations_AreTheKindsTablesRelations: the fan-out derives a
// change for every relation of the kinds table (each kind's parents,
// whose deletion cascades to it, and the kinds its events nest), once,
// and for no other kind of the table: a kind added with a relation and
// no derivation fails here.
func TestDerivations_AreTheKindsTablesRelations(t *testing.T) {
	type rel struct{ from, to models.Kind }
	want := map[rel]bool{}
	for _, k := range models.Kinds {
		spec, _ := models.SpecOf(k)
		for _, parent := range spec.Parents {
			want[rel{parent, k}] = true
		}
		for _, n := range spec.Nests {
			want[rel{k, n}] = true
		}
	}
	got := map[rel]bool{}
	for _, d := range derivations {
		r := rel{d.From, d.To}
		if got[r] {
			t.Errorf("derivation %s → %s is listed twice", d.From, d.To)
		}
		got[r] = true
		if d.Read == nil {
			t.Errorf("derivation %s → %s reads nothing", d.From, d.To)
		}
		if _, ok := models.SpecOf(d.To); ok && !want[r] {
			t.Errorf("derivation %s → %s is no relation of the kinds table", d.From, d.To)
		}
	}
	for r := range want {
		if !got[r] {
			t.Errorf("the kinds table relates %s to %s, and the fan-out derives nothing of it", r.from, r.to)
		}
	}
	if len(want) < 4 {
		t.Errorf("relations of the kinds table = %v; want the cascades and the nested states", want)
	}
}
