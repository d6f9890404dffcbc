package mongo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository/mongo"
	"github.com/usersync/usersync/repository/mongo/mongotest"
)

// emailState is one Clerk state of a user in the email tests: its event,
// time and email.
type emailState struct {
	user, event string
	at          time.Duration
	email       string
}

func (st emailState) change() models.UserChange {
	ch := change(st.user, st.event, st.at, st.email)
	ch.DisplayName = "Name " + st.event
	return ch
}

// permutations returns every order of states.
func permutations(states []emailState) [][]emailState {
	if len(states) <= 1 {
		return [][]emailState{slices.Clone(states)}
	}
	var out [][]emailState
	for i := range states {
		rest := slices.Concat(states[:i:i], states[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]emailState{states[i]}, p...))
		}
	}
	return out
}

// TestUsersApply_EmailChangesConvergeInEveryOrder applies the states of
// users that exchanged emails in Clerk, some of whose events were lost, in
// every order of arrival: each time every user ends on its newest state,
// with the email that state says (or none, where a newer state of another
// user holds it), and no Apply fails or waits for another.
func TestUsersApply_EmailChangesConvergeInEveryOrder(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	tests := []struct {
		name    string
		initial []emailState // applied first, in this order
		states  []emailState // applied in every order
		want    map[string]string
	}{{
		name:    "swap, the intermediate state lost",
		initial: []emailState{{"A", "m0a", 0, "a"}, {"B", "m0b", 0, "b"}},
		// Clerk: A → tmp at 1s (lost), B → a at 2s, A → b at 3s.
		states: []emailState{{"B", "m2", 2 * time.Second, "a"}, {"A", "m3", 3 * time.Second, "b"}},
		want:   map[string]string{"A": "b", "B": "a"},
	}, {
		name:    "swap, the intermediate state late",
		initial: []emailState{{"A", "m0a", 0, "a"}, {"B", "m0b", 0, "b"}},
		states: []emailState{
			{"A", "m1", time.Second, "tmp"}, {"B", "m2", 2 * time.Second, "a"}, {"A", "m3", 3 * time.Second, "b"},
		},
		want: map[string]string{"A": "b", "B": "a"},
	}, {
		name:    "rotation of three, one state lost",
		initial: []emailState{{"A", "m0a", 0, "a"}, {"B", "m0b", 0, "b"}, {"C", "m0c", 0, "c"}},
		// Clerk: C → tmp at 1s (lost), B → c at 2s, A → b at 3s, C → a at 4s.
		states: []emailState{
			{"B", "m2", 2 * time.Second, "c"}, {"A", "m3", 3 * time.Second, "b"}, {"C", "m4", 4 * time.Second, "a"},
		},
		want: map[string]string{"A": "b", "B": "c", "C": "a"},
	}, {
		name: "a newer holder keeps the email; the older claim applies without it",
		// Clerk: B had a until 1s, A has it since 2s; B's state of 1s
		// arrives after A's.
		initial: []emailState{{"A", "m2", 2 * time.Second, "a"}},
		states:  []emailState{{"B", "m1", time.Second, "a"}},
		want:    map[string]string{"A": "a", "B": ""},
	}, {
		name:    "same time: the larger event id is the newer state",
		initial: []emailState{{"A", "m1", time.Second, "a"}},
		states:  []emailState{{"B", "m1b", time.Second, "a"}},
		want:    map[string]string{"A": "", "B": "a"},
	}}
	run := 0
	for _, tc := range tests {
		for _, order := range permutations(tc.states) {
			run++
			prefix := fmt.Sprintf("r%d_", run) // users and emails of their own in one database
			t.Run(tc.name, func(t *testing.T) {
				apply := func(st emailState) {
					t.Helper()
					st.user, st.event = prefix+st.user, prefix+st.event
					if st.email != "" {
						st.email = prefix + st.email + "@example.com"
					}
					got, err := s.Users().Apply(ctx, st.change(), time.Now())
					if err != nil || got != models.OutcomeApplied && got != models.OutcomeStale {
						t.Fatalf("Apply(%s %s %s) = %q, %v; want it applied or stale", st.user, st.event, st.email, got, err)
					}
				}
				for _, st := range tc.initial {
					apply(st)
				}
				for _, st := range order {
					apply(st)
				}
				newest := map[string]emailState{}
				for _, st := range slices.Concat(tc.initial, tc.states) {
					if cur, ok := newest[st.user]; !ok || st.at > cur.at || st.at == cur.at && st.event > cur.event {
						newest[st.user] = st
					}
				}
				for user, want := range tc.want {
					if want != "" {
						want = prefix + want + "@example.com"
					}
					u, err := s.Users().Get(ctx, prefix+user)
					if err != nil {
						t.Fatal(err)
					}
					if u.Email != want || u.LastEventID != prefix+newest[user].event || u.DisplayName != "Name "+prefix+newest[user].event {
						t.Errorf("order %v: %s = email %q, state %s (%s); want email %q, state %s",
							order, user, u.Email, u.LastEventID, u.DisplayName, want, prefix+newest[user].event)
					}
				}
			})
		}
	}
}

// TestUsersApply_AnEmailIsTakenOnlyFromAnOlderState races the two claims
// of a swap with the lost intermediate state: each Apply, on its own,
// takes the email from the other user's older state; run together, the
// filters on the holder's version decide, and both end on their newest
// state.
func TestUsersApply_AnEmailIsTakenOnlyFromAnOlderState(t *testing.T) {
	ctx := context.Background()
	s := mongotest.Open(t)
	for i := range 20 {
		a, b := fmt.Sprintf("user_ra%d", i), fmt.Sprintf("user_rb%d", i)
		ea, eb := fmt.Sprintf("ra%d@example.com", i), fmt.Sprintf("rb%d@example.com", i)
		for _, ch := range []models.UserChange{change(a, "m0a", 0, ea), change(b, "m0b", 0, eb)} {
			if _, err := s.Users().Apply(ctx, ch, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		var wg stdsync.WaitGroup
		for _, ch := range []models.UserChange{change(b, "m2", 2*time.Second, ea), change(a, "m3", 3*time.Second, eb)} {
			wg.Go(func() {
				if got, err := s.Users().Apply(ctx, ch, time.Now()); err != nil || got != models.OutcomeApplied {
					t.Errorf("Apply(%s %s) = %q, %v; want applied", ch.UserID, ch.EventID, got, err)
				}
			})
		}
		wg.Wait()
		ua, _ := s.Users().Get(ctx, a)
		ub, _ := s.Users().Get(ctx, b)
		if ua.Email != eb || ub.Email != ea || ua.LastEventID != "m3" || ub.LastEventID != "m2" {
			t.Errorf("run %d: %s = %q at %s, %s = %q at %s; want the emails swapped", i, a, ua.Email, ua.LastEventID, b, ub.Email, ub.LastEventID)
		}
	}
}

// TestUsersApply_ClaimsRacingTheTakeAreRetriedAFewTimes makes another
// user claim the email each time Apply has taken it and before it writes:
// Apply takes it again, a bounded number of times, and then fails with
// models.ErrEmailTaken, an error that does not carry the email (it is
// stored as the event's error).
func TestUsersApply_ClaimsRacingTheTakeAreRetriedAFewTimes(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		races  int
		wantOK bool
	}{{"one race", 1, true}, {"races without end", 1000, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := mongotest.Open(t)
			const email = "raced@example.com"
			if _, err := s.Users().Apply(ctx, change("user_old", "m0", 0, email), time.Now()); err != nil {
				t.Fatal(err)
			}
			races := 0
			mongo.SetAfterTakeForTest(s, func() {
				if races == tc.races {
					return
				}
				races++
				// A concurrent claim by a state older than the one applied.
				ch := change(fmt.Sprintf("user_racer%d", races), fmt.Sprintf("m1_%d", races), time.Second, email)
				if _, err := s.Users().Apply(ctx, ch, time.Now()); err != nil {
					t.Errorf("racer: %v", err)
				}
			})
			got, err := s.Users().Apply(ctx, change("user_new", "m9", 9*time.Second, email), time.Now())
			if tc.wantOK {
				if err != nil || got != models.OutcomeApplied {
					t.Fatalf("Apply after one race = %q, %v; want applied", got, err)
				}
				if u, _ := s.Users().Get(ctx, "user_new"); u.Email != email {
					t.Errorf("user_new email = %q, want %q", u.Email, email)
				}
				return
			}
			if !errors.Is(err, models.ErrEmailTaken) {
				t.Fatalf("Apply against endless races = %q, %v; want ErrEmailTaken", got, err)
			}
			if strings.Contains(err.Error(), email) {
				t.Errorf("error %q carries the email", err)
			}
			if races > 10 {
				t.Errorf("%d races taken on; want a few", races)
			}
			u, _ := s.Users().Get(ctx, "user_new")
			if u.LastEventID != "" {
				t.Errorf("user_new = %+v; want it unwritten", u)
			}
		})
	}
}
