// Package sqlite is usersync's embedded store: its own schema in one SQLite
// file under the data dir, through modernc.org/sqlite (pure Go, so the
// binary stays static). It implements repository.Store with the promises of
// the MongoDB store (see repository/storetest), for one process.
//
// Writes go through one connection, owned by one goroutine, in short
// IMMEDIATE transactions; the writes that arrive while one commits share
// the next transaction (group commit: one sync to disk for all of them,
// each in a savepoint of its own so that one failing leaves the others).
// Reads use a pool of read-only connections and see the last commit (WAL).
// Every rule that decides a write (ordering, tombstones, email ownership,
// the first outcome, claims) is checked inside that write's transaction,
// so concurrent deliveries of one user need no locks in Go.
//
// Durability: synchronous=FULL in WAL mode, so a commit is on disk when it
// returns: a 200 answered for a webhook survives a crash of the process and
// of the machine.
//
// The WAL index is in the process's memory, not in a -shm file mapped
// into it (SQLite's unix-excl VFS: the process holds the database file
// exclusively, and its connections share the index). A mapped file of a
// disk that stops answering (a frozen filesystem) would stop the whole
// process: a write to a page of the mapping waits in a page fault, where
// the Go runtime cannot stop the goroutine, so the next stop of the world
// (a garbage collection) would wait for the disk, and every goroutine
// with it. A read or write of the files is a system call, during which
// the runtime goes on: the disk then holds the writer alone.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sqlite3 "modernc.org/sqlite"
	sqlite3lib "modernc.org/sqlite/lib"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// FileName is the store's file in the data dir.
const FileName = "usersync.db"

// applicationID marks a SQLite file as usersync's (PRAGMA application_id):
// "usyn".
const applicationID = 0x7573796e

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune a store.
type Options struct {
	// Readers is the number of read connections; default 4.
	Readers int
	// MaxBatch bounds the writes that share one transaction; default 64.
	MaxBatch int
	// WriteGate, if set, is called by the writer before each transaction
	// it begins, and holds the writer until it returns: tests stand a disk
	// that does not answer (a frozen filesystem) in for it.
	WriteGate func()
	// SoleProcess: the caller holds the data dir's lock, so no other
	// process uses the store; Open releases every lease, each of them a
	// process's that ended (a restart after a kill takes its work up at
	// once, not when the lease runs out).
	SoleProcess bool
}

// Store is the embedded store.
type Store struct {
	path  string
	w     *sql.DB // the one write connection, used by the writer alone
	r     *sql.DB // read-only connections
	reqs  chan *writeReq
	bg    chan *writeReq // background writes (writeBackground)
	stop  chan struct{}
	done  chan struct{}
	batch int
	// kept are the statements prepared on the write connection (the
	// writer's alone: see wtx).
	kept map[string]*sql.Stmt
	// erased is set by a write that erased personal data, and cleared
	// once a checkpoint has emptied the write-ahead log after it, so that
	// the erased bytes leave the log as well as the database
	// (secure_delete). See checkpointErased.
	erased atomic.Bool
	// erasedNow is set with erased, and cleared by the commit after which
	// the writer tries the checkpoint at once; checkpointAt is when it
	// last tried one.
	erasedNow    atomic.Bool
	checkpointAt time.Time
	// writes counts the writes asked of the writer (tests count round trips).
	writes atomic.Int64
	// gate is Options.WriteGate.
	gate func()
	// busySince is the Unix ns at which the writer began its current
	// batch, 0 while it waits for one; batchDone the Unix ns at which it
	// last finished one; stalledAt the Unix ns at which a write last gave
	// up waiting to start (its deadline passed). The writes are stalled
	// while a batch runs longer than stallAfter, or a write gave up since
	// the last batch finished (see stalled).
	busySince, batchDone, stalledAt atomic.Int64

	users    *Users
	orgs     *Organizations
	mships   *Memberships
	invs     *Invitations
	events   *Events
	leases   *Leases
	activity *Activity
	runs     *Runs
	billing  *Billing
	outbound *Outbound
}

var _ repository.Store = (*Store)(nil)

// Open opens (creating it if needed) the store in dir and brings its
// schema to this version. It refuses a file that is not usersync's, and a
// file it cannot write, naming the file.
func Open(ctx context.Context, dir string, o Options) (*Store, error) {
	if o.Readers <= 0 {
		o.Readers = 4
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 64
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if err := checkOwner(ctx, path); err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := prepare(ctx, w, path); err != nil {
		_ = w.Close()
		return nil, err
	}
	if o.SoleProcess {
		if err := releaseAll(ctx, w); err != nil {
			_ = w.Close()
			return nil, err
		}
	}
	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(o.Readers)
	r.SetMaxIdleConns(o.Readers)
	s := &Store{
		path: path, w: w, r: r, batch: o.MaxBatch, gate: o.WriteGate, kept: map[string]*sql.Stmt{},
		reqs: make(chan *writeReq, 256), bg: make(chan *writeReq, 256), stop: make(chan struct{}), done: make(chan struct{}),
	}
	s.users = &Users{s: s}
	s.orgs = &Organizations{s: s}
	s.mships = &Memberships{s: s}
	s.invs = &Invitations{s: s}
	s.events = &Events{s: s}
	s.leases = &Leases{s: s}
	s.activity = &Activity{s: s}
	s.runs = &Runs{s: s}
	s.billing = &Billing{s: s}
	s.outbound = &Outbound{s: s}
	go s.writer()
	return s, nil
}

// busyTimeout is how long a statement waits for a lock another process
// holds before it fails with SQLITE_BUSY (one that had the file open
// when usersync started; once open, usersync holds it exclusively).
const busyTimeout = 5 * time.Second

// dsn is the data source name of path: WAL, full sync, a busy timeout
// (another process may hold the file briefly when the store opens),
// IMMEDIATE write transactions, secure_delete so that erased bodies are
// overwritten on disk rather than left in free pages, and the unix-excl
// VFS, which keeps the WAL index in memory (see the package's doc): it
// locks the file against other processes, and every connection of the
// store uses it, so that they share the index.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	for _, p := range []string{fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()), "journal_mode(WAL)", "synchronous(FULL)", "secure_delete(ON)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	q.Set("vfs", "unix-excl")
	if readOnly {
		q.Add("_pragma", "query_only(ON)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Users returns the users.
func (s *Store) Users() repository.Users { return s.users }

// Organizations returns the organizations.
func (s *Store) Organizations() repository.Organizations { return s.orgs }

// Memberships returns the organization memberships.
func (s *Store) Memberships() repository.Memberships { return s.mships }

// Invitations returns the organization invitations.
func (s *Store) Invitations() repository.Invitations { return s.invs }

// Events returns the event inbox and log.
func (s *Store) Events() repository.Events { return s.events }

// Leases returns the leases.
func (s *Store) Leases() repository.Leases { return s.leases }

// Activity returns the counts of the console's charts.
func (s *Store) Activity() repository.Activity { return s.activity }

// Runs returns the summaries of the last reconcile and backfill runs.
func (s *Store) Runs() repository.Runs { return s.runs }

// Billing returns the Clerk Billing objects and each payer's plan.
func (s *Store) Billing() repository.Billing { return s.billing }

// BuildIndexes has nothing to do: every index exists from the migration
// that made its table.
func (s *Store) BuildIndexes(context.Context) error { return nil }

// Ping checks that the writes go ahead (models.ErrStalled when they do
// not, see stalled) and that the file answers a read of its schema
// (models.ErrCorrupt for a damaged first page or schema). A file that
// became read-only, or a full disk, answers it: the API remembers the
// writes they refused.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.stalled(time.Now()); err != nil {
		return err
	}
	var n int
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return fmt.Errorf("ping: %w", translate(err))
	}
	return nil
}

// stallAfter is how long one batch of writes may run before the writes
// count as stalled: models.UserWriteTimeout, the deadline of a webhook's
// write.
const stallAfter = models.UserWriteTimeout

// stalled returns an error wrapping models.ErrStalled and
// models.ErrUnavailable while the writer's batch has run longer than
// stallAfter, or a write gave up waiting to start since the writer last
// finished a batch; nil otherwise.
func (s *Store) stalled(now time.Time) error {
	since := int64(0)
	if busy := s.busySince.Load(); busy != 0 && now.Sub(time.Unix(0, busy)) > stallAfter {
		since = busy
	}
	if at := s.stalledAt.Load(); at != 0 && at > s.batchDone.Load() && (since == 0 || at < since) {
		since = at
	}
	if since == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w: no write has finished since %s (does the disk answer?)",
		models.ErrUnavailable, models.ErrStalled, time.Unix(0, since).UTC().Format(time.RFC3339))
}

// Close stops the writer after the writes queued so far and closes the file.
func (s *Store) Close(context.Context) error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	rerr := s.r.Close()
	if err := s.w.Close(); err != nil {
		return err
	}
	return rerr
}

// checkOwner refuses a file at path that is not usersync's, before
// anything writes to it (opening it for writes would switch it to WAL).
func checkOwner(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	var header [100]byte
	n, _ := io.ReadFull(f, header[:])
	f.Close()
	switch {
	case n == 0:
		return nil // an empty file: SQLite makes a database of it
	case n < len(header) || string(header[:16]) != "SQLite format 3\x00":
		return fmt.Errorf("%s is not a SQLite file (another program's?): set USERSYNC_DATA_DIR to a directory of usersync's own: %w",
			path, models.ErrForeignData)
	case binary.BigEndian.Uint32(header[68:72]) == applicationID:
		return nil // marked as usersync's
	}
	// Unmarked in its header: a new file whose first transaction is still
	// in the write-ahead log, or another program's. Ask SQLite.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var app, version, tables int
	if err := db.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return fmt.Errorf("%s is not a SQLite file usersync can read (%w): set USERSYNC_DATA_DIR to a directory of usersync's own", path, translate(err))
	}
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read %s: %w", path, translate(err))
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&tables); err != nil {
		return fmt.Errorf("read %s: %w", path, translate(err))
	}
	switch {
	case app == applicationID:
	case tables > 0:
		return fmt.Errorf("%s is not a usersync store (it holds tables of another program): "+
			"set USERSYNC_DATA_DIR to a directory of usersync's own: %w", path, models.ErrForeignData)
	case app != 0 || version != 0:
		// usersync marks its file in the transaction that numbers its
		// schema: a number without the mark is another program's.
		return fmt.Errorf("%s is not a usersync store (another program's empty SQLite database: it has no tables, "+
			"and another program's application id %d and version %d): set USERSYNC_DATA_DIR to a directory of usersync's own: %w",
			path, app, version, models.ErrForeignData)
	}
	return nil
}

// prepare runs the migrations path lacks, and checks that it can be
// written.
func prepare(ctx context.Context, w *sql.DB, path string) error {
	var version int
	if err := w.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("%s cannot be opened for writing (%w): check its permissions, its directory's and the disk", path, translate(err))
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	if version > len(names) {
		return fmt.Errorf("%s has schema %d, newer than this usersync knows (%d): run a newer usersync", path, version, len(names))
	}
	for i := version; i < len(names); i++ {
		body, err := migrations.ReadFile(names[i])
		if err != nil {
			return err
		}
		if err := migrate(ctx, w, string(body), i+1); err != nil {
			return fmt.Errorf("migrate %s to schema %d: %w", path, i+1, translate(err))
		}
	}
	// A file that cannot be written is refused now, not at the first
	// webhook: a write that changes nothing still needs the write lock.
	if _, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(names))); err != nil {
		return fmt.Errorf("%s cannot be written (%w): check its permissions and the disk", path, translate(err))
	}
	return nil
}

func migrate(ctx context.Context, w *sql.DB, body string, version int) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, body); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		return err
	}
	return tx.Commit()
}

// writeReq is one write waiting for the writer.
type writeReq struct {
	ctx context.Context
	fn  func(tx *wtx) error
	err chan error
	// n is how many writes fn makes of the kind the writer shares out (a
	// batch of settles is as many): a background write's weight.
	n int
	// state goes from reqQueued to reqStarted (the writer runs it) or to
	// reqAbandoned (its deadline passed first: it is never run), once.
	state atomic.Int32
}

const (
	reqQueued int32 = iota
	reqStarted
	reqAbandoned
)

// notStarted is the error of a write whose ctx ended before the writer
// started it. A deadline that passed means the writes are stalled (a
// write's deadline is seconds, a batch milliseconds): it wraps
// models.ErrStalled and models.ErrUnavailable, and readiness reports it
// until the writer finishes a batch.
func (s *Store) notStarted(ctx context.Context) error {
	err := context.Cause(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("the write did not start before its request ended: %w", err)
	}
	s.stalledAt.Store(time.Now().UnixNano())
	return fmt.Errorf("%w: %w: the write could not start within its deadline (%w)", models.ErrUnavailable, models.ErrStalled, err)
}

// errClosed: the store is closed.
var errClosed = fmt.Errorf("the store is closed: %w", models.ErrUnavailable)

// write runs fn in a write transaction, shared with the writes queued at
// the same time, and returns once that transaction is committed (fn's
// changes are on disk) or fn failed (its changes are undone). fn runs on
// the writer: it must be short and must not wait for anything but the
// database. A request whose ctx ends before it runs is not run, and
// returns then (notStarted), however long the writer is held up: a disk
// that does not answer holds the writer, not the callers.
func (s *Store) write(ctx context.Context, fn func(tx *wtx) error) error {
	return s.enqueue(ctx, s.reqs, 1, fn)
}

// writeBackground is write for work that no caller waits on with a
// deadline of its own (outbound webhooks' fan-out, settles and records of
// an endpoint's health): the writer takes the other writes first, and
// these join a transaction up to backgroundShare of it (at least that
// many while they wait), so that they never stop and never hold up
// Clerk's deliveries by more than their share.
func (s *Store) writeBackground(ctx context.Context, fn func(tx *wtx) error) error {
	return s.enqueue(ctx, s.bg, 1, fn)
}

// writeBackgroundN is writeBackground for fn that makes n writes (a batch
// of settles): it counts as n in the background's share.
func (s *Store) writeBackgroundN(ctx context.Context, n int, fn func(tx *wtx) error) error {
	return s.enqueue(ctx, s.bg, max(n, 1), fn)
}

// backgroundShare: in a transaction begun by other writes, background
// writes take one for every backgroundShare of those (one at least),
// a share kept over transactions for a background write that weighs
// more; in one begun by a background write, as many as it has room for.
const backgroundShare = 4

// quietFor is how long the writer waits, with only background writes
// queued, for another write before it begins a transaction with them: a
// burst of Clerk's deliveries, whose writes come more often, keeps the
// writer for them and gives the background writes their share of it; a
// steady stream leaves them the writer between its writes.
const quietFor = 2 * time.Millisecond

func (s *Store) enqueue(ctx context.Context, queue chan *writeReq, n int, fn func(tx *wtx) error) error {
	s.writes.Add(1)
	req := &writeReq{ctx: ctx, fn: fn, err: make(chan error, 1), n: n}
	select {
	case queue <- req:
	case <-ctx.Done():
		return s.notStarted(ctx)
	case <-s.stop:
		return errClosed
	}
	select {
	case err := <-req.err:
		return err
	case <-ctx.Done():
		if req.state.CompareAndSwap(reqQueued, reqAbandoned) {
			return s.notStarted(ctx)
		}
		// Started: the answer is waited for, the write may commit.
		return <-req.err
	}
}

// drain commits the writes queued when the store closes, one at a time.
func (s *Store) drain() {
	for {
		select {
		case r := <-s.reqs:
			s.commit([]*writeReq{r})
		case r := <-s.bg:
			s.commit([]*writeReq{r})
		default:
			return
		}
	}
}

func (s *Store) writer() {
	defer close(s.done)
	// held is a background write taken from its queue that waits for the
	// share to reach its weight; credit is the share earned and not used.
	var held *writeReq
	credit := 0
	for {
		var first *writeReq
		var retry <-chan time.Time
		if s.erased.Load() {
			// An outside reader held the log: try again once it may be gone.
			retry = time.After(checkpointRetry)
		}
		select {
		case first = <-s.reqs: // one waiting goes first
		default:
		}
		bgLed := false
		if first == nil {
			cand := held
			held = nil
			if cand == nil {
				select {
				case <-retry:
					s.checkpointErased()
					continue
				case first = <-s.reqs:
				case cand = <-s.bg:
				case <-s.stop:
					s.drain()
					return
				}
			}
			if cand != nil {
				// Clerk's writes first: a background write begins a
				// transaction only once no other write has come for
				// quietFor; one that comes meanwhile begins it, and the
				// background write waits for its share.
				quiet := time.NewTimer(quietFor)
				select {
				case first = <-s.reqs:
					held = cand
				case <-quiet.C:
					first, bgLed = cand, true
				case <-s.stop:
					s.commit([]*writeReq{cand})
					s.drain()
					return
				}
				quiet.Stop()
			}
		}
		// The writes waiting first, then the background ones: in a
		// transaction the other writes began (they were waiting), up to
		// the share they earn (backgroundShare); in one that began with a
		// background write (none other waited), as many as it has room
		// for.
		batch := []*writeReq{first}
		background := 0
		if bgLed {
			background = first.n
		}
	fill:
		for len(batch) < s.batch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		if bgLed {
			credit = 0
			for background < s.batch {
				r := held
				if r == nil {
					select {
					case r = <-s.bg:
					default:
					}
				}
				if r == nil {
					break
				}
				held = nil
				batch = append(batch, r)
				background += r.n
			}
		} else {
			credit = min(credit+max(1, (len(batch)+backgroundShare-1)/backgroundShare), s.batch)
			for {
				r := held
				if r == nil {
					select {
					case r = <-s.bg:
					default:
					}
				}
				if r == nil {
					credit = 0 // none waits: no share is kept for later
					break
				}
				if r.n > credit && credit < s.batch {
					held = r // its turn comes once the share reaches it
					break
				}
				held = nil
				batch = append(batch, r)
				credit = max(0, credit-r.n)
			}
		}
		s.commit(batch)
	}
}

// commit runs the batch in one transaction, each write in a savepoint.
func (s *Store) commit(batch []*writeReq) {
	errs := make([]error, len(batch))
	reply := func() {
		for i, r := range batch {
			r.err <- errs[i]
		}
	}
	defer reply()
	s.busySince.Store(time.Now().UnixNano())
	defer func() {
		s.batchDone.Store(time.Now().UnixNano())
		s.busySince.Store(0)
	}()
	if s.gate != nil {
		s.gate()
	}
	// The writer's statements never take a caller's context: interrupting
	// one statement would roll back the whole shared transaction.
	ctx := context.Background()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		for i := range errs {
			errs[i] = translate(err)
		}
		return
	}
	var fresh []string
	defer func() { s.keepStatements(fresh) }()
	t := &wtx{tx: tx, kept: s.kept, fresh: &fresh}
	ran := 0
	for i, r := range batch {
		if r.ctx.Err() != nil && r.state.CompareAndSwap(reqQueued, reqAbandoned) {
			errs[i] = s.notStarted(r.ctx)
			continue
		}
		if !r.state.CompareAndSwap(reqQueued, reqStarted) {
			continue // abandoned by its caller, who has its answer
		}
		if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
			errs[i] = translate(err)
			continue
		}
		if err := r.fn(t); err != nil {
			errs[i] = err
			if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO w"); rerr != nil {
				// The transaction is in an unknown state: give it up whole.
				_ = tx.Rollback()
				for j := range errs {
					if errs[j] == nil || j == i {
						errs[j] = fmt.Errorf("%w (and undoing it: %w)", errs[j], translate(rerr))
					}
				}
				return
			}
		} else {
			ran++
		}
		if _, err := tx.ExecContext(ctx, "RELEASE w"); err != nil && errs[i] == nil {
			errs[i] = translate(err)
		}
	}
	if ran == 0 {
		_ = tx.Rollback()
		return
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = translate(err)
			}
		}
		return
	}
	if s.erasedNow.Swap(false) || (s.erased.Load() && time.Since(s.checkpointAt) >= checkpointRetry) {
		s.checkpointErased()
	}
}

// checkpointRetry is how often the writer tries again to empty the
// write-ahead log of erased data while a reader holds it back.
const checkpointRetry = time.Second

// checkpointErased copies the write-ahead log into the database and
// empties it (a TRUNCATE checkpoint), on the writer, after a commit that
// erased data. A reader that holds a read transaction (a long read of
// the pool; another process cannot open the file while the store holds
// it) keeps the log from being emptied: the checkpoint then gives up at once rather than wait for it
// (the writer would stall for the busy timeout), erased stays set, and
// the writer tries again at most every checkpointRetry, after its commits
// and while it is idle, until the reader has gone.
func (s *Store) checkpointErased() {
	s.checkpointAt = time.Now()
	ctx := context.Background()
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		return
	}
	defer func() {
		_, _ = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA busy_timeout = %d", busyTimeout.Milliseconds()))
	}()
	var busy, logFrames, done int
	err = conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done)
	if err == nil && busy == 0 {
		s.erased.Store(false)
	}
}

// wtx is the write transaction a write runs in.
type wtx struct {
	tx    *sql.Tx
	stmts map[string]*sql.Stmt // closed with the transaction
	// kept are the statements prepared on the write connection, which
	// outlive transactions (the writer's alone); fresh, those a
	// transaction prepared for itself, to keep once it has ended.
	kept  map[string]*sql.Stmt
	fresh *[]string
}

// stmt is q prepared once and reused by every write of it: by the
// transaction's statement of a statement kept on the write connection,
// which compiles nothing again, or else prepared in the transaction and
// kept once it ends (keepStatements).
func (t *wtx) stmt(q string) (*sql.Stmt, error) {
	st, ok := t.stmts[q]
	if !ok {
		if kept := t.kept[q]; kept != nil {
			st = t.tx.StmtContext(context.Background(), kept)
		} else {
			var err error
			if st, err = t.tx.PrepareContext(context.Background(), strings.TrimSpace(q)); err != nil {
				return nil, translate(err)
			}
			if t.fresh != nil {
				*t.fresh = append(*t.fresh, q)
			}
		}
		if t.stmts == nil {
			t.stmts = map[string]*sql.Stmt{}
		}
		t.stmts[q] = st
	}
	return st, nil
}

// maxKept bounds the statements kept on the write connection: the
// store's writes are a fixed set (a few are built per call, and those
// past the bound are prepared per transaction).
const maxKept = 512

// keepStatements prepares on the write connection, now free, the
// statements a transaction prepared for itself: SQLite compiles each
// once for the store's life rather than once a transaction.
func (s *Store) keepStatements(qs []string) {
	for _, q := range qs {
		if len(s.kept) >= maxKept {
			return
		}
		if _, ok := s.kept[q]; ok {
			continue
		}
		// Trimmed: the driver keeps the compiled form of a statement
		// with nothing after it, and compiles a text with a tail (were
		// it only white space) at each run.
		st, err := s.w.PrepareContext(context.Background(), strings.TrimSpace(q))
		if err != nil {
			continue // prepared per transaction, as before
		}
		s.kept[q] = st
	}
}

func (t *wtx) exec(q string, args ...any) (sql.Result, error) {
	st, err := t.stmt(q)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(context.Background(), args...)
	return res, translate(err)
}

// execN runs q and returns the number of rows it changed.
func (t *wtx) execN(q string, args ...any) (int64, error) {
	res, err := t.exec(q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (t *wtx) row(q string, args ...any) *sql.Row {
	st, err := t.stmt(q)
	if err != nil {
		// The same error again, from the row: the caller's Scan reports it.
		return t.tx.QueryRowContext(context.Background(), q, args...)
	}
	return st.QueryRowContext(context.Background(), args...)
}

func (t *wtx) query(q string, args ...any) (*sql.Rows, error) {
	rows, err := t.tx.QueryContext(context.Background(), q, args...)
	return rows, translate(err)
}

// readAll runs the read q and scans every row of its answer.
func readAll[T any](ctx context.Context, db *sql.DB, q string, scan func(scanner) (T, error), args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, translate(rows.Err())
}

// translate turns a SQLite error into one that wraps a models sentinel
// where one applies, keeping the driver's error in the chain. A cancelled
// context is left as it is.
func translate(err error) error {
	var se *sqlite3.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows):
		return models.ErrNotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case !errors.As(err, &se):
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3lib.SQLITE_FULL:
		return &dbError{msg: "the disk is full", sentinels: []error{models.ErrStorageFull, models.ErrUnavailable}, err: err}
	case sqlite3lib.SQLITE_READONLY:
		return &dbError{msg: "the database file cannot be written", sentinels: []error{models.ErrReadOnly, models.ErrUnavailable}, err: err}
	case sqlite3lib.SQLITE_BUSY, sqlite3lib.SQLITE_LOCKED, sqlite3lib.SQLITE_IOERR, sqlite3lib.SQLITE_CANTOPEN:
		return &dbError{msg: "the database file is not available", sentinels: []error{models.ErrUnavailable}, err: err}
	case sqlite3lib.SQLITE_CORRUPT, sqlite3lib.SQLITE_NOTADB:
		return &dbError{msg: "the database file is damaged", sentinels: []error{models.ErrCorrupt, models.ErrUnavailable}, err: err}
	case sqlite3lib.SQLITE_CONSTRAINT:
		return &dbError{msg: "a unique rule refused the write", sentinels: []error{errDuplicate}, err: err}
	}
	return err
}

// errDamaged: a stored value is not what usersync writes there (JSON
// that is not JSON): the file's page was damaged in a way SQLite's own
// checks do not see.
var errDamaged = &dbError{msg: "a stored value is damaged (it is not what was written)",
	sentinels: []error{models.ErrCorrupt, models.ErrUnavailable}, err: errors.New("invalid stored value")}

// damagedJSON returns b as JSON, or an error wrapping errDamaged that
// names what holds it when it is not JSON.
func damagedJSON(what string, b string) (json.RawMessage, error) {
	if !json.Valid([]byte(b)) {
		return nil, fmt.Errorf("%s: %w", what, errDamaged)
	}
	return json.RawMessage(b), nil
}

// errDuplicate: a unique index refused a write. It stays inside the
// store: every write that can meet one decides what it means.
var errDuplicate = errors.New("duplicate key")

// dbError is a SQLite error as the rest of usersync sees it: a message of
// its own (the driver's may carry values and internals), the sentinels it
// means, and the driver's error for errors.As.
type dbError struct {
	msg       string
	sentinels []error
	err       error
}

func (e *dbError) Error() string { return e.msg }

// Unwrap gives the sentinels, then the driver's error.
func (e *dbError) Unwrap() []error { return append(slices.Clone(e.sentinels), e.err) }

// ms is t as stored: Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// msPtr is t as stored, NULL for nil.
func msPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// fromMS is a stored time.
func fromMS(n int64) time.Time { return time.UnixMilli(n).UTC() }

// timePtr is a stored nullable time.
func timePtr(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromMS(n.Int64)
	return &t
}

// text is s as stored: NULL for "".
func text(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBool is a stored nullable bool.
func nullBool(b *bool) any {
	if b == nil {
		return nil
	}
	if *b {
		return 1
	}
	return 0
}

// cursorInt parses the integer of a cursor.
func cursorInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, models.ErrBadCursor()
	}
	return n, nil
}

// Migrate reports the schema: Open brings it to this version (each
// migration one transaction, numbered by PRAGMA user_version), so there is
// nothing left to do.
func (s *Store) Migrate(ctx context.Context, _ bool) (repository.MigrateReport, error) {
	var v int
	if err := s.r.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return repository.MigrateReport{}, translate(err)
	}
	return repository.MigrateReport{Summary: fmt.Sprintf("%s is at schema %d", s.path, v)}, nil
}
