package api

import (
	"context"
	"time"

	"github.com/usersync/usersync/models"
)

// Defaults of the bounds on list reads (see Limits).
const (
	DefaultReads     = 8
	DefaultReadWait  = time.Second
	DefaultPageBytes = 4 << 20
)

// pageChunk is how many users one read of the store asks for: a page of
// up to 200 is read in chunks, so that it can stop at the page's bytes.
const pageChunk = 50

// reads bounds the list reads in flight (GET /v1/users, the change feed,
// GET /v1/events): each holds a page in memory while the store reads it
// and while the client reads the answer, and a slow client holds it long.
type reads struct {
	slots chan struct{}
	wait  time.Duration
	bytes int
}

func newReads(l Limits) *reads {
	if l.Reads <= 0 {
		l.Reads = DefaultReads
	}
	if l.ReadWait <= 0 {
		l.ReadWait = DefaultReadWait
	}
	if l.PageBytes <= 0 {
		l.PageBytes = DefaultPageBytes
	}
	return &reads{slots: make(chan struct{}, l.Reads), wait: l.ReadWait, bytes: l.PageBytes}
}

// acquire takes a read slot, waiting at most the configured time; it fails
// with models.ErrOverloaded (503 with Retry-After) when none came free.
func (r *reads) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-r.slots }
	select {
	case r.slots <- struct{}{}:
		return release, nil
	default:
	}
	t := time.NewTimer(r.wait)
	defer t.Stop()
	select {
	case r.slots <- struct{}{}:
		return release, nil
	case <-t.C:
		return nil, models.Public(models.ErrOverloaded, "%d list reads are in flight, as many as this instance serves at once; retry shortly", cap(r.slots))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readUsers reads a page of at most limit users after the cursor after,
// pageChunk at a time through read, and stops early once the page holds
// the page's bytes (metadata up to 64 KiB a user makes 200 users up to
// 13 MiB). A chunk shorter than asked ends the page: the list has no
// more, or the change feed is caught up (its NextCursor is always set).
func (r *reads) readUsers(limit int, after string, read func(after string, limit int) (models.UserPage, error)) (models.UserPage, error) {
	var page models.UserPage
	size := 0
	for {
		n := min(limit-len(page.Users), pageChunk)
		p, err := read(after, n)
		if err != nil {
			return models.UserPage{}, err
		}
		page.Users = append(page.Users, p.Users...)
		page.NextCursor = p.NextCursor
		for _, u := range p.Users {
			size += userBytes(u)
		}
		if len(p.Users) < n || p.NextCursor == "" || len(page.Users) >= limit || size >= r.bytes {
			return page, nil
		}
		after = p.NextCursor
	}
}

// userBytes is about what u holds in memory and in its JSON.
func userBytes(u models.User) int {
	return 256 + len(u.UserID) + len(u.Email) + len(u.DisplayName) + len(u.Metadata) + len(u.FirstName) +
		len(u.LastName) + len(u.Username) + len(u.ImageURL) + len(u.PhoneNumber) + len(u.ExternalID)
}
