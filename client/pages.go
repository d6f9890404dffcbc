package client

import (
	"context"
	"iter"
	"maps"
	"net/url"
	"strconv"
	"time"
)

// maxLimit is the largest page the API serves, and the client's default.
const maxLimit = 200

// page is a page as the API answers it.
type page[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"nextCursor"`
}

// Page is one page of a list.
type Page[T any] struct {
	Items []T
	// NextCursor is where the next page starts; "" after the last page.
	NextCursor string
}

// List is one list of the API with its filters: read it a page at a time
// (Page), or walk its items (All).
type List[T any] struct {
	c     *Client
	path  string
	query url.Values
}

// newList is the list at path (escaped) with query, limit items a page
// (0: the most the API serves).
func newList[T any](c *Client, path string, query url.Values, limit int) *List[T] {
	if query == nil {
		query = url.Values{}
	}
	query.Set("limit", strconv.Itoa(limitOf(limit)))
	return &List[T]{c: c, path: path, query: query}
}

// limitOf is the page size asked for limit: 0 is the most the API serves.
func limitOf(limit int) int {
	if limit <= 0 {
		return maxLimit
	}
	return limit
}

// Page reads the page that starts at cursor: "" for the first, else the
// NextCursor of the page before it.
func (l *List[T]) Page(ctx context.Context, cursor string) (Page[T], error) {
	q := maps.Clone(l.query)
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	p, err := get[page[T]](ctx, l.c, l.path, q)
	if err != nil {
		return Page[T]{}, err
	}
	out := Page[T]{Items: p.Data}
	if p.NextCursor != nil {
		out.NextCursor = *p.NextCursor
	}
	return out, nil
}

// All walks the list's items from its first page on, reading a page at a
// time. It stops at the first error, which it yields.
func (l *List[T]) All(ctx context.Context) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			p, err := l.Page(ctx, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range p.Items {
				if !yield(it, nil) {
					return
				}
			}
			if p.NextCursor == "" {
				return
			}
			cursor = p.NextCursor
		}
	}
}

// Changes is one page of a change feed.
type Changes[T any] struct {
	// Items are the objects that changed, oldest change first; a deleted
	// one carries only its ids and times, DeletedAt set. An object that
	// changed again since comes again later: apply each as a whole.
	Items []T
	// Cursor is where the feed goes on after this page: save it once
	// Items are applied, and start the next walk from it.
	Cursor string
	// CaughtUp is true after a short page: nothing more to read now (a
	// page is also cut at about 4 MiB: the rest then comes on the next
	// poll). Changes are served 30 s after they applied.
	CaughtUp bool
}

// FeedOptions are where the walk of a change feed starts.
type FeedOptions struct {
	// Cursor is a Changes.Cursor (or Feed.Cursor) saved by an earlier
	// walk; "": from Since.
	Cursor string
	// Since is the oldest change wanted; zero: every change.
	Since time.Time
	// Limit is the changes per page, 1 to 200; 0: 200.
	Limit int
}

// Feed walks one change feed from a cursor. It is not safe for
// concurrent use.
type Feed[T any] struct {
	c      *Client
	path   string
	since  string
	cursor string
	limit  int
}

// newFeed is the change feed at path, walked from o.
func newFeed[T any](c *Client, path string, o FeedOptions) *Feed[T] {
	since := o.Since
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	return &Feed[T]{c: c, path: path, since: since.UTC().Format(time.RFC3339Nano), cursor: o.Cursor, limit: limitOf(o.Limit)}
}

// Cursor is where the feed goes on: the cursor it started from, or that
// of the last page read.
func (f *Feed[T]) Cursor() string { return f.cursor }

// Next reads the page after the feed's cursor, and moves the cursor past
// it.
func (f *Feed[T]) Next(ctx context.Context) (Changes[T], error) {
	ch, err := f.read(ctx)
	if err == nil {
		f.cursor = ch.Cursor
	}
	return ch, err
}

// read reads the page after the feed's cursor.
func (f *Feed[T]) read(ctx context.Context) (Changes[T], error) {
	q := url.Values{"updatedSince": {f.since}, "limit": {strconv.Itoa(f.limit)}}
	if f.cursor != "" {
		q.Set("cursor", f.cursor)
	}
	p, err := get[page[T]](ctx, f.c, f.path, q)
	if err != nil {
		return Changes[T]{}, err
	}
	ch := Changes[T]{Items: p.Data, Cursor: f.cursor, CaughtUp: len(p.Data) < f.limit}
	if p.NextCursor != nil && *p.NextCursor != "" {
		ch.Cursor = *p.NextCursor
	}
	return ch, nil
}

// Pages walks the feed from its cursor until it is caught up, a page at
// a time. The feed's cursor moves past a page once the loop's body for it
// returns: a body that breaks out leaves it before that page. It stops at
// the first error, which it yields.
func (f *Feed[T]) Pages(ctx context.Context) iter.Seq2[Changes[T], error] {
	return func(yield func(Changes[T], error) bool) {
		for {
			ch, err := f.read(ctx)
			if err != nil {
				yield(Changes[T]{}, err)
				return
			}
			if !yield(ch, nil) {
				return
			}
			f.cursor = ch.Cursor
			if ch.CaughtUp {
				return
			}
		}
	}
}

// Follow walks the feed as Pages does, without end: caught up, it waits
// poll (0: 30 s) and reads again, until ctx ends. An error is yielded
// too; if the loop's body goes on, the page is read again after poll.
func (f *Feed[T]) Follow(ctx context.Context, poll time.Duration) iter.Seq2[Changes[T], error] {
	if poll <= 0 {
		poll = 30 * time.Second
	}
	return func(yield func(Changes[T], error) bool) {
		for ctx.Err() == nil {
			ch, err := f.read(ctx)
			if ctx.Err() != nil {
				return
			}
			if !yield(ch, err) {
				return
			}
			if err == nil {
				f.cursor = ch.Cursor
			}
			if err == nil && !ch.CaughtUp {
				continue
			}
			t := time.NewTimer(poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}
