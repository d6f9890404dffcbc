package api_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/usersync/usersync/repository/repotest"
	"github.com/usersync/usersync/repository/sqlite"
)

// TestErase_CompletesOnceAnOutsideReaderGoesAndDoesNotStallTheWriter: a
// reader outside the store's pool (a connection of the test's own: another
// process cannot open the file while the store holds it) holds a read
// transaction on the embedded store while a user is erased and 50 more
// deliveries arrive. The write-ahead log cannot be emptied while that
// reader holds it, but the writer does not wait for it (an erase is
// answered well within the busy timeout, 5 s, which a waiting checkpoint
// would take), and once the reader has gone the erased data leave the log
// with no further write.
func TestErase_CompletesOnceAnOutsideReaderGoesAndDoesNotStallTheWriter(t *testing.T) {
	t.Parallel()
	if repotest.UsesMongoDB() {
		t.Skip("a reader of the embedded store's file")
	}
	h := newHarness(t)
	const id = "user_erasereader"
	h.mustDeliver(newID(), personBody(t, "user.created", id, t0))
	h.mustDeliver(newID(), personBody(t, "user.updated", id, t0+1000))
	h.mustDeliver(newID(), deleteBody(t, id, t0+2000))

	path := h.store.(*sqlite.Store).Path()
	outside, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer outside.Close()
	ctx := context.Background()
	reader, err := outside.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if r := h.postAs("/v1/users/"+id+"/erase", testAdminKey); r.Code != http.StatusOK {
		t.Fatalf("erase = %s", r)
	}
	if took := time.Since(start); took >= 5*time.Second {
		t.Errorf("the erase behind an outside reader took %v: the writer waited for the reader", took)
	}
	for i := range 50 {
		h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: fmt.Sprintf("user_after%02d", i), UpdatedAt: t0}))
	}
	_ = reader.Rollback()
	_ = outside.Close()

	// No write from here on: the writer empties the log by itself.
	deadline := time.Now().Add(30 * time.Second)
	for {
		found := h.leftovers(personal)
		if len(found) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the outside reader went, personal data is still in the store's files: %v", found)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
