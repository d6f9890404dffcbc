package api

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
)

// Every list and change feed of users, organizations and memberships is
// answered by one reader, listPage or feedPage: includeDeleted for admin
// keys only, one bound on the cursor, a read slot while the page is read
// and encoded (listRead), the page read from the store pageChunk items at
// a time until it holds the page's bytes (readPage), and in a change feed
// the settle time and the tombstones of deleted items. Each kind gives
// only how to show and size one item (its pageKind) and, in its handler,
// how to read a page of it from the store.

// maxCursor is the longest cursor, in characters, that the lists and
// change feeds of every kind take: no shorter than any cursor a store has
// ever answered, so that a cursor an application kept (a change feed's,
// above all) is always taken back. The embedded store's list cursor is the page's last
// id in hex: at most 256 digits for an id of Clerk's shape (128 bytes),
// up to 1,000 for an id stored before usersync checked ids' shape (then
// 128 characters of any script: up to 500 bytes). Its change feeds' cursor
// is the last change's time in milliseconds, "_" and its id: at most
// 15 + 1 + 128 characters (the plans' feed: "<kind>/<id>", at most
// 15 + 1 + 12 + 1 + 128). MongoDB's are an ObjectID in hex (24), and a
// time and an ObjectID (at most 40).
const maxCursor = 1024

// pageChunk is how many items one read of the store asks for: a page of
// up to 200 is read in chunks, so that it can stop at the page's bytes.
const pageChunk = 50

// pageResponse is one page of any list or change feed. nextCursor is null
// after a list's last page, and always a string in a change feed.
type pageResponse struct {
	Data       []any   `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

// deletedTimes are the times every tombstone of the change feeds shows,
// after the deleted item's ids.
type deletedTimes struct {
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	DeletedAt string `json:"deletedAt"`
}

// pageKind is what the page reader needs of one kind of item.
type pageKind[T any] struct {
	// size is about what an item holds in memory and in its JSON.
	size func(T) int
	// show is the item as the API shows it.
	show func(T) any
	// times are the item's createdAt, updatedAt and deletedAt (nil while
	// it is not deleted).
	times func(T) (created, updated time.Time, deleted *time.Time)
	// tombstone is a deleted item in the change feed: its ids, and t.
	tombstone func(item T, t deletedTimes) any
}

// adminOnly refuses includeDeleted to a key that is not an admin's: the
// one check of it, for every route that takes it.
func adminOnly(c echo.Context, includeDeleted bool) error {
	if includeDeleted && !isAdmin(c) {
		return models.Public(models.ErrForbidden, "includeDeleted needs an admin key").In("includeDeleted")
	}
	return nil
}

// checkCursor refuses a cursor longer than any a store answers.
func checkCursor(cursor string) error {
	if utf8.RuneCountInString(cursor) > maxCursor {
		return models.Public(models.ErrInvalid, "cursor must be at most %d", maxCursor).In("cursor")
	}
	return nil
}

// feedAlone refuses a list's filter, or includeDeleted, with updatedSince:
// the change feed takes neither, and always has the deleted items.
func feedAlone(filter string, filtered, includeDeleted bool, items string) error {
	if filtered || includeDeleted {
		return models.Public(models.ErrInvalid, "updatedSince cannot be combined with %s or includeDeleted (the change feed always includes deleted %s)",
			filter, items).In("updatedSince")
	}
	return nil
}

// feedUntil is the newest change the change feeds serve now: a change is
// served once it is the settle time old (models.ChangeSettle), so that a
// write that commits late with an older updatedAt is never behind a
// position already served.
func (s *server) feedUntil() time.Time {
	return s.now().Add(-s.settle).UTC().Truncate(time.Millisecond)
}

// listPage answers one page of a list of k, at most limit items after
// cursor, read through list; deleted items are only for an admin
// (includeDeleted, which list applies).
func listPage[T any](s *server, c echo.Context, k pageKind[T], limit int, cursor string, includeDeleted bool,
	list func(ctx context.Context, after string, limit int) ([]T, string, error)) error {
	if err := adminOnly(c, includeDeleted); err != nil {
		return err
	}
	if err := checkCursor(cursor); err != nil {
		return err
	}
	return s.listRead(c, func(ctx context.Context) (any, error) {
		items, next, err := readPage(s.reads.bytes, limit, cursor, k.size, func(after string, n int) ([]T, string, error) {
			return list(ctx, after, n)
		})
		if err != nil {
			return nil, err
		}
		resp := pageResponse{Data: make([]any, 0, len(items))}
		for _, it := range items {
			resp.Data = append(resp.Data, k.show(it))
		}
		if next != "" {
			resp.NextCursor = &next
		}
		return resp, nil
	})
}

// feedPage answers one page of the change feed of k: at most limit items
// changed at or after updatedSince (RFC 3339) and at least the settle
// time ago, oldest change first, after cursor, read through changes;
// deleted items as tombstones, for any key. nextCursor is always set, so
// that a caught-up client polls with it.
func feedPage[T any](s *server, c echo.Context, k pageKind[T], limit int, cursor, updatedSince string,
	changes func(ctx context.Context, f models.ChangeFilter) ([]T, string, error)) error {
	if err := checkCursor(cursor); err != nil {
		return err
	}
	since, err := parseTime("updatedSince", updatedSince)
	if err != nil {
		return err
	}
	return s.listRead(c, func(ctx context.Context) (any, error) {
		until := s.feedUntil()
		items, next, err := readPage(s.reads.bytes, limit, cursor, k.size, func(after string, n int) ([]T, string, error) {
			return changes(ctx, models.ChangeFilter{Since: since, Until: until, After: after, Limit: n})
		})
		if err != nil {
			return nil, err
		}
		resp := pageResponse{Data: make([]any, 0, len(items)), NextCursor: &next}
		for _, it := range items {
			created, updated, deleted := k.times(it)
			if deleted == nil {
				resp.Data = append(resp.Data, k.show(it))
				continue
			}
			resp.Data = append(resp.Data, k.tombstone(it, deletedTimes{
				CreatedAt: formatTime(created), UpdatedAt: formatTime(updated), DeletedAt: formatTime(*deleted),
			}))
		}
		return resp, nil
	})
}

// readPage reads a page of at most limit items after the cursor after,
// pageChunk at a time through read, and stops early once the items' sizes
// reach bytes: metadata of up to 64 KiB an item makes 200 items up to
// 13 MiB, and a membership's permissions up to 250 KiB more. A chunk
// shorter than asked ends the page: the list has no more, or the change
// feed is caught up (its cursor is always set).
func readPage[T any](bytes, limit int, after string, size func(T) int,
	read func(after string, limit int) ([]T, string, error)) ([]T, string, error) {
	var (
		page  []T
		next  string
		total int
	)
	for {
		n := min(limit-len(page), pageChunk)
		items, cursor, err := read(after, n)
		if err != nil {
			return nil, "", err
		}
		page, next = append(page, items...), cursor
		for _, it := range items {
			total += size(it)
		}
		if len(items) < n || next == "" || len(page) >= limit || total >= bytes {
			return page, next, nil
		}
		after = next
	}
}
