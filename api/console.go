package api

import (
	"context"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// ActivityReader reads the per-minute and per-hour event counts written
// as events arrive and are processed (see sync.Activity).
type ActivityReader interface {
	// Buckets returns the buckets of size (models.ActivityMinute or
	// models.ActivityHour) that start in [from, to), oldest first; a
	// bucket without events may be absent.
	Buckets(ctx context.Context, size time.Duration, from, to time.Time) ([]models.ActivityBucket, error)
}

// FailureGrouper groups failed events by reason.
type FailureGrouper interface {
	// FailureGroups groups the failed events by models.FailureReason of
	// their error, reading at most scan of them, newest first.
	FailureGroups(ctx context.Context, scan int) (models.FailureGroups, error)
}

// RunReader reads the summaries of the last reconcile and backfill runs.
type RunReader interface {
	// Last returns the last n run summaries, the latest start first.
	Last(ctx context.Context, n int) ([]models.ReconcileSummary, error)
}

// ReconcileDryRun previews a reconcile of every kind: it reads Clerk's
// lists and reports what a run would change, changing nothing. onPage and onNote
// are told of its progress as sync.ReconcileOptions' OnPage and OnNote
// are.
type ReconcileDryRun func(ctx context.Context, onPage func(offset int, page sync.Tally), onNote func(sync.Note)) (sync.ReconcileReport, error)

// Console is what the operator's console needs beyond the rest of the
// API. Any part left nil makes its endpoints answer 501 not_configured.
type Console struct {
	Activity ActivityReader
	Failures FailureGrouper
	Runs     RunReader
	// DryRun previews a reconcile; nil without CLERK_SECRET_KEY.
	DryRun ReconcileDryRun
	// Context bounds the background work of the console's endpoints (a
	// dry run): cancelled, it stops. nil means context.Background().
	Context context.Context
}

// consoleFiles are the console's page, script and style sheet: static
// files, the same for everyone. They hold no data; every datum comes from
// the /v1 API, with the admin key the page is given.
//
//go:embed console
var consoleFiles embed.FS

// consoleCSP allows the console its own files and its own API, nothing
// else: no inline script or style, no other host, no framing.
const consoleCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// console answers GET /admin and GET /admin/{file} with the console's
// static files. Anyone may read them: they are the same for everyone and
// hold no data.
func (s *server) console(c echo.Context) error {
	name := c.Param("file")
	if name == "" {
		name = "index.html"
	}
	if path.Base(name) != name || path.Ext(name) == "" {
		return echo.NewHTTPError(http.StatusNotFound, "no such file of the console")
	}
	b, err := fs.ReadFile(consoleFiles, "console/"+name)
	if err != nil {
		return echo.NewHTTPError(http.StatusNotFound, "no such file of the console")
	}
	h := c.Response().Header()
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = echo.MIMEOctetStream
	}
	return c.Blob(http.StatusOK, ctype, b)
}

func (s *server) consoleContext() context.Context {
	if s.consoleCfg.Context != nil {
		return s.consoleCfg.Context
	}
	return context.Background()
}

func notConfigured(what string) error {
	return echo.NewHTTPError(http.StatusNotImplemented, what+" is not configured on this server")
}
