package mongo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// memSource is a collection in memory, read as a page reads one: find
// evaluates the filter the page built with matches (filter_test.go) on
// every document and sorts the matches as asked. It counts the finds and
// the most matches one find sorted: what an engine that sorts every
// match sorts.
type memSource[T any] struct {
	t     *testing.T
	docs  []T
	maps  []map[string]any // docs as filters see them (docMap)
	finds int
	most  int
}

func newMemSource[T any](t *testing.T, docs []T) *memSource[T] {
	s := &memSource[T]{t: t, docs: docs}
	for _, d := range docs {
		s.maps = append(s.maps, docMap(t, d))
	}
	return s
}

func (s *memSource[T]) find(_ context.Context, filter, order bson.D, limit int) ([]T, error) {
	s.t.Helper()
	s.finds++
	var hits []T
	var docs []map[string]any
	for i, m := range s.maps {
		if matches(s.t, filter, m) {
			hits, docs = append(hits, s.docs[i]), append(docs, m)
		}
	}
	s.most = max(s.most, len(hits))
	idx := make([]int, len(hits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool {
		for _, k := range order {
			if c := compare(s.t, docs[idx[i]][k.Key], docs[idx[j]][k.Key]); c != 0 {
				return c < 0 == (k.Value.(int) > 0)
			}
		}
		return false
	})
	var out []T
	for _, i := range idx[:min(limit, len(idx))] {
		out = append(out, hits[i])
	}
	return out, nil
}

func (s *memSource[T]) estimate(context.Context) (int64, error) { return int64(len(s.docs)), nil }

// docMap is d as the fields a filter sees: its BSON, dates as time.Time.
func docMap(t *testing.T, d any) map[string]any {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := bson.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		if dt, ok := v.(bson.DateTime); ok {
			m[k] = dt.Time().UTC()
		}
	}
	return m
}

// pagingUsers are n users, every 7th deleted and every 11th
// deprovisioned.
func pagingUsers(n int) []userDoc {
	var docs []userDoc
	for i := range n {
		id := fmt.Sprintf("user_mem_%03d", i)
		d := userDoc{ID: docID(id), UserID: id, UpdatedAt: filterT0}
		if i%7 == 0 {
			d.DeletedAt = &filterT0
		}
		if i%11 == 0 {
			d.Profile.Deprovisioned = true
		}
		docs = append(docs, d)
	}
	return docs
}

// byID sorts documents' ids as pages list them.
func byID[T pageDoc](docs []T, keep func(T) bool) []string {
	var ids []string
	for _, d := range docs {
		if keep(d) {
			ids = append(ids, d.pageID().Hex())
		}
	}
	slices.Sort(ids)
	return ids
}

// TestListUsers_WindowsListEveryUserOnceInOrder pages through users in
// memory, active and all, as List does on a server: every user comes
// once, in _id order, every page but the last is full, and once a walk
// has measured the density no find of a page of 9 sorts more than a few
// pages (16: windows vary).
func TestListUsers_WindowsListEveryUserOnceInOrder(t *testing.T) {
	src := newMemSource(t, pagingUsers(400))
	var d densities
	for _, includeDeleted := range []bool{false, true} {
		want := byID(src.docs, func(u userDoc) bool {
			return includeDeleted || u.DeletedAt == nil && !u.Profile.Deprovisioned
		})
		for _, limit := range []int{1, 9, 500} {
			for walk := range 2 {
				src.most = 0
				f := models.UserFilter{IncludeDeleted: includeDeleted, Limit: limit}
				var got []string
				for pages := 0; ; pages++ {
					page, err := listUsers(context.Background(), src, &d, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, u := range page.Users {
						got = append(got, docID(u.UserID).Hex())
					}
					if page.NextCursor == "" {
						break
					}
					if len(page.Users) != limit || pages > 500 {
						t.Fatalf("%+v: page %d of %d users with a next cursor", f, pages, len(page.Users))
					}
					f.After = page.NextCursor
				}
				if !slices.Equal(got, want) {
					t.Errorf("includeDeleted=%v limit %d walk %d: listed %d users, want %d in _id order", includeDeleted, limit, walk, len(got), len(want))
				}
				if bound := 16 * (limit + 1); walk == 1 && limit == 9 && src.most > bound {
					t.Errorf("includeDeleted=%v limit %d walk %d: a find sorted %d matches, want at most %d", includeDeleted, limit, walk, src.most, bound)
				}
			}
		}
	}
}

// TestChangesPage_ServesEveryUserChangeOnceInOrder follows the users'
// change feed in memory from long before, over users written at uneven
// times (the same millisecond, seconds and days apart).
func TestChangesPage_ServesEveryUserChangeOnceInOrder(t *testing.T) {
	docs := pagingUsers(300)
	at := filterT0
	r := rand.New(rand.NewPCG(9, 10))
	for i := range docs {
		at = unevenly(r, at)
		docs[i].UpdatedAt = at
	}
	src := newMemSource(t, docs)
	checkFeed(t, src, docs, func(ctx context.Context, d *densities, f models.ChangeFilter) ([]userDoc, string, error) {
		return changesPage(ctx, src, d, "users", f)
	})
}

// unevenly is the time after at of the next write of a feed: the same
// millisecond, seconds later or days later.
func unevenly(r *rand.Rand, at time.Time) time.Time {
	switch r.IntN(4) {
	case 0:
		return at.Add(time.Duration(1+r.IntN(5)) * 24 * time.Hour)
	case 1:
		return at
	}
	return at.Add(time.Duration(1+r.IntN(300)) * time.Second)
}

// checkFeed follows the change feed of docs (read by page from src), a
// few a page, twice: every document comes once, oldest change first (then
// by _id), every page but the last is full, and an empty page's cursor is
// where the next poll starts. The first walk starts a year before the
// first change, the second a minute before, with the density the first
// met: no find of the second sorts more than a few pages (16: the windows
// of small pages vary). (A window that crosses a year without changes
// into the changes holds most of them: see "Bounded pages" in
// docs/mongodb-queries.md.)
func checkFeed[T pageDoc](t *testing.T, src *memSource[T], docs []T,
	page func(context.Context, *densities, models.ChangeFilter) ([]T, string, error)) {
	t.Helper()
	sorted := slices.Clone(docs)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.changedAt().Equal(b.changedAt()) {
			return a.changedAt().Before(b.changedAt())
		}
		return a.pageID().Hex() < b.pageID().Hex()
	})
	var want []string
	for _, d := range sorted {
		want = append(want, d.pageID().Hex())
	}
	until := sorted[len(sorted)-1].changedAt()
	var d densities
	for walk := range 2 {
		src.most = 0
		f := models.ChangeFilter{Since: sorted[0].changedAt().Add(-365 * 24 * time.Hour), Until: until, Limit: 6}
		if walk == 1 {
			f.Since = sorted[0].changedAt().Add(-time.Minute)
		}
		var got []string
		for pages := 0; ; pages++ {
			docs, next, err := page(context.Background(), &d, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, doc := range docs {
				got = append(got, doc.pageID().Hex())
			}
			if next == "" || pages > 500 {
				t.Fatalf("walk %d: page %d: next cursor %q", walk, pages, next)
			}
			if len(docs) < f.Limit {
				if len(docs) == 0 && next != f.After {
					t.Errorf("walk %d: an empty page's cursor %q, want %q", walk, next, f.After)
				}
				break
			}
			f.After = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("walk %d: the feed served %d documents, want %d in order", walk, len(got), len(want))
		}
		if bound := 16 * (f.Limit + 1); walk == 1 && src.most > bound {
			t.Errorf("walk %d: a find sorted %d matches, want at most %d", walk, src.most, bound)
		}
	}
}

// pagingOrgs are n organizations written at uneven times, every 5th
// deleted (a tombstone has no slug), every 9th with the slug "shared".
func pagingOrgs(n int) []orgDoc {
	r := rand.New(rand.NewPCG(11, 12))
	at := filterT0
	var docs []orgDoc
	for i := range n {
		id := fmt.Sprintf("org_mem_%03d", i)
		at = unevenly(r, at)
		d := orgDoc{ID: docID(id), OrgID: id, Slug: new(id), UpdatedAt: at}
		if i%9 == 0 {
			d.Slug = new("shared")
		}
		if i%5 == 0 {
			d.Slug, d.DeletedAt = nil, &at
		}
		docs = append(docs, d)
	}
	return docs
}

// TestListOrgs_WindowsListEveryOrganizationOnceInOrder pages through
// organizations in memory, active, all and by slug, as List does on a
// server: every organization comes once, in _id order, every page but the
// last is full; once a walk has measured the density no find of a page
// of 9 sorts more than a few pages; a slug's page is one query.
func TestListOrgs_WindowsListEveryOrganizationOnceInOrder(t *testing.T) {
	src := newMemSource(t, pagingOrgs(400))
	var d densities
	for _, f := range []models.OrganizationFilter{{}, {IncludeDeleted: true}, {Slug: "shared"}, {Slug: "shared", IncludeDeleted: true}} {
		want := byID(src.docs, func(o orgDoc) bool {
			return (f.IncludeDeleted || o.DeletedAt == nil) && (f.Slug == "" || deref(o.Slug) == f.Slug)
		})
		for _, limit := range []int{1, 9, 500} {
			for walk := range 2 {
				src.most, src.finds = 0, 0
				f := f
				f.Limit = limit
				var got []string
				pages := 0
				for ; ; pages++ {
					page, err := listOrgs(context.Background(), src, &d, f)
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range page.Organizations {
						got = append(got, docID(o.OrgID).Hex())
					}
					if page.NextCursor == "" {
						break
					}
					if len(page.Organizations) != limit || pages > 500 {
						t.Fatalf("%+v: page %d of %d organizations with a next cursor", f, pages, len(page.Organizations))
					}
					f.After = page.NextCursor
				}
				if !slices.Equal(got, want) {
					t.Errorf("%+v walk %d: listed %d organizations, want %d in _id order", f, walk, len(got), len(want))
				}
				if bound := 16 * (limit + 1); f.Slug == "" && walk == 1 && limit == 9 && src.most > bound {
					t.Errorf("%+v walk %d: a find sorted %d matches, want at most %d", f, walk, src.most, bound)
				}
				if f.Slug != "" && src.finds != pages+1 {
					t.Errorf("%+v: %d pages in %d finds, want one each", f, pages+1, src.finds)
				}
			}
		}
	}
	if _, err := listOrgs(context.Background(), src, &d, models.OrganizationFilter{Limit: 2, After: "nonsense"}); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a malformed cursor: %v, want ErrInvalid", err)
	}
}

// TestChangesPage_ServesEveryOrganizationChangeOnceInOrder follows the
// organizations' change feed in memory, tombstones included.
func TestChangesPage_ServesEveryOrganizationChangeOnceInOrder(t *testing.T) {
	docs := pagingOrgs(300)
	src := newMemSource(t, docs)
	checkFeed(t, src, docs, func(ctx context.Context, d *densities, f models.ChangeFilter) ([]orgDoc, string, error) {
		return changesPage(ctx, src, d, "organizations", f)
	})
}

// pagingMemberships are the memberships of organizations of 250, 40 and
// 4 members, written at uneven times; user_support is a member of each,
// and of 30 more. Every 6th is a tombstone.
func pagingMemberships() []membershipDoc {
	r := rand.New(rand.NewPCG(13, 14))
	at := filterT0
	var docs []membershipDoc
	add := func(orgID, userID string) {
		at = unevenly(r, at)
		id := fmt.Sprintf("orgmem_%s_%s", orgID, userID)
		d := membershipDoc{ID: docID(id), MembershipID: id, OrgID: orgID, UserID: userID, ActiveKey: activeKey(orgID, userID), UpdatedAt: at}
		if len(docs)%6 == 0 {
			d.ActiveKey, d.DeletedAt = "", &at
		}
		docs = append(docs, d)
	}
	for _, org := range []struct {
		id string
		n  int
	}{{"org_big", 250}, {"org_mid", 40}, {"org_small", 4}} {
		for i := range org.n {
			add(org.id, fmt.Sprintf("user_%03d", i))
		}
		add(org.id, "user_support")
	}
	for i := range 30 {
		add(fmt.Sprintf("org_%02d", i), "user_support")
	}
	return docs
}

// TestMembershipDocs_PagesListEveryMembershipOnceInOrder pages through
// the memberships of organizations and users of every size in memory, as
// List does on a server (repository.Page over membershipDocs, keeping
// what a rule keeps, here three in four): every kept membership comes
// once, in _id order, and every page but the last is full. Once a walk
// of the large organization has measured the density, no find of a page
// of 9 sorts more than a few pages.
func TestMembershipDocs_PagesListEveryMembershipOnceInOrder(t *testing.T) {
	src := newMemSource(t, pagingMemberships())
	var d densities
	kept := func(m membershipDoc) bool { return m.pageID()[11]%4 != 0 }
	for _, f := range []models.MembershipFilter{
		{OrgID: "org_big"}, {OrgID: "org_small"}, {OrgID: "org_mid", IncludeDeleted: true}, {OrgID: "org_big", IncludeDeleted: true},
		{UserID: "user_support"}, {UserID: "user_007"}, {UserID: "user_support", IncludeDeleted: true}, {OrgID: "org_none"},
	} {
		want := byID(src.docs, func(m membershipDoc) bool {
			return (m.OrgID == f.OrgID || f.OrgID == "" && m.UserID == f.UserID) && (f.IncludeDeleted || m.DeletedAt == nil) && kept(m)
		})
		for _, limit := range []int{1, 9, 500} {
			for walk := range 2 {
				src.most = 0
				read := func(after string, n int) ([]membershipDoc, error) {
					return membershipDocs(context.Background(), src, &d, f, after, n)
				}
				var got []string
				after := ""
				for pages := 0; ; pages++ {
					items, next, err := repository.Page(limit, after, read, kept, func(m membershipDoc) string { return m.ID.Hex() })
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range items {
						got = append(got, m.ID.Hex())
					}
					if next == "" {
						break
					}
					if len(items) != limit || pages > 500 {
						t.Fatalf("%+v: page %d of %d memberships with a next cursor", f, pages, len(items))
					}
					after = next
				}
				if !slices.Equal(got, want) {
					t.Errorf("%+v limit %d walk %d: listed %d memberships, want %d in _id order", f, limit, walk, len(got), len(want))
				}
				if bound := 16 * (limit + 1); f.OrgID == "org_big" && walk == 1 && limit == 9 && src.most > bound {
					t.Errorf("%+v walk %d: a find sorted %d matches, want at most %d", f, walk, src.most, bound)
				}
			}
		}
	}
	if _, err := membershipDocs(context.Background(), src, &d, models.MembershipFilter{OrgID: "org_big"}, "nonsense", 2); !errors.Is(err, models.ErrInvalid) {
		t.Errorf("a malformed cursor: %v, want ErrInvalid", err)
	}
}

// TestChangesPage_ServesEveryMembershipChangeOnceInOrder follows the
// memberships' change feed in memory, tombstones included.
func TestChangesPage_ServesEveryMembershipChangeOnceInOrder(t *testing.T) {
	docs := pagingMemberships()
	src := newMemSource(t, docs)
	checkFeed(t, src, docs, func(ctx context.Context, d *densities, f models.ChangeFilter) ([]membershipDoc, string, error) {
		return changesPage(ctx, src, d, "memberships", f)
	})
}
