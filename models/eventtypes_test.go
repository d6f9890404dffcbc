package models_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/usersync/usersync/models"
)

// TestClerkEventTypes_AppliedIsWhatTheKindsTableHas: a type whose row
// projects nothing is applied when, and only when, the kinds table has it;
// one whose row projects something is projected, whether the kinds table
// has it or not. Every type the kinds table has is in the catalog.
func TestClerkEventTypes_AppliedIsWhatTheKindsTableHas(t *testing.T) {
	t.Parallel()
	for _, c := range models.ClerkEventTypes {
		if c.Projects != "" {
			if c.Fate() != models.FateProjected {
				t.Errorf("%s projects %q: fate %s, want projected", c.Type, c.Projects, c.Fate())
			}
			continue
		}
		if applied, stored := c.Fate() == models.FateApplied, models.KindOf(c.Type) != ""; applied != stored {
			t.Errorf("%s: fate %s, kind %q", c.Type, c.Fate(), models.KindOf(c.Type))
		}
	}
	for _, typ := range models.StoredTypes() {
		if !models.IsClerkEventType(typ) {
			t.Errorf("%s, of kind %s, is not in the catalog", typ, models.KindOf(typ))
		}
	}
}

// TestClerkEventTypes_SessionTypesProjectAUsersLastActiveAt: the five
// session types are projected onto the user's lastActiveAt.
func TestClerkEventTypes_SessionTypesProjectAUsersLastActiveAt(t *testing.T) {
	t.Parallel()
	var sessions []string
	for _, c := range models.ClerkEventTypes {
		if !strings.HasPrefix(c.Type, "session.") {
			continue
		}
		sessions = append(sessions, c.Type)
		if c.Fate() != models.FateProjected || !strings.Contains(c.Projects, "lastActiveAt") {
			t.Errorf("%s: fate %s, projects %q; want projected onto a user's lastActiveAt", c.Type, c.Fate(), c.Projects)
		}
	}
	if len(sessions) != 5 {
		t.Errorf("session types %q, want Clerk's five", sessions)
	}
}

// TestClerkEventTypes_NamesEachOfClerksTypesOnceAndNoneOfUsersyncsOwn:
// each row is a Clerk type, object.event, once; usersync's own outbound
// types that Clerk does not send (plan.changed) are not rows.
func TestClerkEventTypes_NamesEachOfClerksTypesOnceAndNoneOfUsersyncsOwn(t *testing.T) {
	t.Parallel()
	shape := regexp.MustCompile(`^[a-z][a-zA-Z]*\.[a-z][a-zA-Z_]*$`)
	seen := map[string]bool{}
	for _, c := range models.ClerkEventTypes {
		if seen[c.Type] {
			t.Errorf("%s is in the catalog twice", c.Type)
		}
		seen[c.Type] = true
		if !shape.MatchString(c.Type) {
			t.Errorf("%q is not a Clerk type's shape", c.Type)
		}
		if !slices.Contains(models.Fates, c.Fate()) {
			t.Errorf("%s: fate %q is not one of %q", c.Type, c.Fate(), models.Fates)
		}
	}
	if len(seen) < 48 {
		t.Errorf("the catalog has %d types, Clerk documents 48", len(seen))
	}
	for _, own := range []string{models.TypePlanChanged, "usersync.test"} {
		if seen[own] {
			t.Errorf("%s, usersync's own outbound type, is in Clerk's catalog", own)
		}
	}
}

// TestSubscribedTypes_AreTheAppliedAndProjectedTypes: what an operator
// subscribes to is every type usersync applies or projects, and no
// ignored one.
func TestSubscribedTypes_AreTheAppliedAndProjectedTypes(t *testing.T) {
	t.Parallel()
	sub := models.SubscribedTypes()
	for _, c := range models.ClerkEventTypes {
		if want := c.Fate() != models.FateIgnored; slices.Contains(sub, c.Type) != want {
			t.Errorf("%s (%s): subscribed %v", c.Type, c.Fate(), !want)
		}
	}
	for _, typ := range append(models.StoredTypes(), "session.created") {
		if !slices.Contains(sub, typ) {
			t.Errorf("%s is not subscribed", typ)
		}
	}
	if slices.Contains(sub, "email.created") {
		t.Error("email.created, which usersync ignores, is subscribed")
	}
}
