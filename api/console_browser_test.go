package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/sync"
)

// chromium returns the path of a Chromium (or Chrome) binary, or "".
func chromium() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotDir is where the browser tests save their screenshots:
// $USERSYNC_SCREENSHOTS if set; "" if not, and then none are taken (in
// the test's temporary directory they would be deleted unseen).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("USERSYNC_SCREENSHOTS")
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium with a fresh profile, at 1280×800.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium()
	if path == "" {
		t.Skip("no chromium binary: install Debian's chromium (apt-get install chromium) to run the console's browser test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// page runs browser steps with a bound on how long they may wait for the
// page, so that a console that never shows what a step waits for fails
// the test rather than hanging it.
type page struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		text, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		p.t.Fatalf("%s: %v; the page reads:\n%s", what, err, text)
	}
}

// until waits for a JavaScript condition to hold on the page.
func (p *page) until(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(0))); err != nil {
		text, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		p.t.Fatalf("%s: %v; the page reads:\n%s", what, err, text)
	}
}

func (p *page) screenshot(name string) {
	p.t.Helper()
	if p.dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, name+".png"), b, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// TestConsole_InABrowser drives the console in Chromium against the real
// server: sign-in with a wrong key, an API key and an admin key; the
// overview and its charts; a user found by email, its events, a failed
// one opened and replayed once the user's writes pass again; the event log,
// a look-up by svix-id and the replay of a failure group; reconcile's runs
// and a dry run; and the pages at a phone's width. Screenshots of each go
// to $USERSYNC_SCREENSHOTS if set (none are taken otherwise).
func TestConsole_InABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	h := newConsoleHarness(t, func(o *consoleOptions) {
		o.dryRun = func(ctx context.Context, onPage func(int, sync.Tally), onNote func(sync.Note)) (sync.ReconcileReport, error) {
			onPage(0, sync.Tally{Read: 4, Applied: 1, Unchanged: 3})
			onPage(0, sync.Tally{Read: 2, Unchanged: 2})
			onPage(0, sync.Tally{Read: 7, Applied: 1, Unchanged: 6})
			onNote(sync.Note{Kind: models.KindUser, ID: "user_new_in_clerk", Action: sync.NoteWouldCreate})
			onNote(sync.Note{Kind: models.KindUser, ID: "user_gone_from_clerk", Action: sync.NoteWouldDelete})
			onNote(sync.Note{Kind: models.KindOrganization, ID: "org_gone_from_clerk", Action: sync.NoteWouldDelete})
			onNote(sync.Note{Kind: models.KindMembership, ID: "orgmem_new_in_clerk", Action: sync.NoteWouldCreate})
			return sync.ReconcileReport{Kinds: []sync.KindReport{
				{Kind: models.KindUser, Complete: true, Listed: sync.Tally{Read: 4, Applied: 1, Unchanged: 3}, Local: 4, Deleted: 1},
				{Kind: models.KindOrganization, Complete: true, Listed: sync.Tally{Read: 2, Unchanged: 2}, Local: 3, Deleted: 1},
				{Kind: models.KindMembership, Complete: true, Listed: sync.Tally{Read: 7, Applied: 1, Unchanged: 6}, Local: 6},
			}}, nil
		}
	})
	failed, unblock := h.block(2)
	badID := newID()
	if r := h.deliver(badID, []byte(`{"type":"user.updated","data":{"id":"user_bad"}}`)); r.Code != http.StatusBadRequest {
		t.Fatalf("an invalid payload: %s", r)
	}
	// An organization deleted, and a late update of it: outcome deleted.
	h.mustDeliver(newID(), editFixture(t, "openapi.organization.deleted.json", func(env, _ map[string]any) {
		env["timestamp"] = time.Now().Add(-time.Minute).UnixMilli()
	}))
	if got := h.mustDeliver(newID(), editFixture(t, "openapi.organization.updated.json", func(_, d map[string]any) {
		d["updated_at"] = time.Now().UnixMilli()
	})); got["outcome"] != "deleted" {
		t.Fatalf("a late update of a deleted organization = %v, want outcome deleted", got)
	}
	// An hour of traffic for the charts, and a reconcile run.
	now := time.Now()
	for i := range 60 {
		at := now.Add(-time.Duration(i) * time.Minute)
		for kind, n := range map[string]int64{models.ActivityReceived: int64(5 + i%7), models.ActivityApplied: int64(4 + i%5), models.ActivityStale: int64(i % 3),
			models.ActivityDeleted: int64(i % 4 / 3)} {
			if err := h.store.Activity().Add(context.Background(), at, kind, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := h.store.Runs().Record(context.Background(), models.ReconcileSummary{
		Kind: "reconcile", Trigger: "schedule", StartedAt: now.Add(-20 * time.Minute), Duration: 3 * time.Second,
		Success: true, Users: &models.ReconcileCounts{Clerk: 5, Local: 5, Applied: 1, Unchanged: 4},
		Organizations: &models.ReconcileCounts{Clerk: 2, Local: 3, Unchanged: 2, Deleted: 1},
	}); err != nil {
		t.Fatal(err)
	}
	h.flush()

	p := &page{t: t, ctx: ctx, dir: screenshotDir(t)}
	if p.dir != "" {
		t.Logf("screenshots in %s", p.dir)
	}

	// Sign in: a key the server does not know, an API key, an admin key.
	p.do("open the console", chromedp.Navigate(h.url+"/admin"), chromedp.WaitVisible(css("#key")))
	p.screenshot("01-login")
	p.do("type a wrong key", chromedp.SetValue(css("#key"), "usk_not_a_key"), chromedp.Click(css("#login-form button")))
	p.until("a wrong key is refused", `document.getElementById("login-error").textContent.includes("not known to this server")`)
	p.screenshot("02-login-wrong-key")
	p.do("type an API key", chromedp.SetValue(css("#key"), testAPIKey), chromedp.Click(css("#login-form button")))
	p.until("an API key is refused", `document.getElementById("login-error").textContent.includes("needs an admin key")`)
	p.do("type the admin key", chromedp.SetValue(css("#key"), testAdminKey), chromedp.Click(css("#login-form button")))
	p.until("the overview shows", `document.querySelector("#card-ready") && document.querySelector("#card-ready").textContent.includes("ready")`)
	p.until("the charts show", `document.querySelectorAll("#chart-received svg rect.bar-received").length > 50`)
	p.until("the backlog shows", `document.querySelector("#card-failed .value").textContent.trim() === "3"`)
	p.until("the failed card says of which kind", `document.querySelector("#card-failed .sub").textContent === "1 given up · 3 user"`)
	p.until("the outcomes chart draws the deleted outcome, with a legend",
		`document.querySelectorAll("#chart-outcomes svg rect.bar-deleted").length >= 15 && document.querySelector("#chart-outcomes .legend .k-deleted") !== null &&
		getComputedStyle(document.querySelector("#chart-outcomes svg rect.bar-deleted")).fill === "rgb(191, 57, 137)"`)
	p.until("the processed card counts the deleted outcome", `document.querySelector("#card-processed .sub").textContent.endsWith(" stale, 1 deleted")`)
	p.until("the last reconcile says what it did to each kind", `(() => { const c = document.querySelector("#card-reconcile .sub").textContent;
		return c.includes("users: 5 in Clerk, 1 applied") && c.includes("organizations: 2 in Clerk, 0 applied, 1 deleted") && !c.includes("memberships") })()`)
	p.until("the key is kept in the tab only", `sessionStorage.getItem("usersync.adminKey") === "`+testAdminKey+`" && localStorage.length === 0 && document.cookie === ""`)
	p.screenshot("03-overview")

	// Users: find one by email, open it, open its failed event.
	p.do("open users", chromedp.Click(css(`#nav a[data-page="users"]`)), chromedp.WaitVisible(css("#user-q")))
	p.do("find by email", chromedp.SendKeys(css("#user-q"), "mover0@example.com"), chromedp.Click(css("#user-find")),
		chromedp.WaitVisible(css(`#user-list a[href="#/users/user_mover0"]`)))
	p.screenshot("04-users")
	ev := fmt.Sprintf(`#user-events details[data-event="%s"]`, failed[0])
	p.do("open the user", chromedp.Click(css(`#user-list a[href="#/users/user_mover0"]`)),
		chromedp.WaitVisible(css("#user-fields")), chromedp.WaitVisible(css(ev)))
	p.do("open its failed event", chromedp.Click(css(ev+" summary")), chromedp.WaitVisible(css(ev+" pre.payload")))
	p.until("the payload shows", `document.querySelector('`+ev+` pre.payload').textContent.includes("moved0@example.com")`)
	p.screenshot("05-user-event")

	// The user's writes pass again: replay the event and see it processed.
	unblock()
	p.do("replay", chromedp.Click(css(ev+" button.replay")), chromedp.WaitVisible(css("#confirm")))
	p.screenshot("06-confirm-replay")
	p.do("confirm", chromedp.Click(css("#confirm-ok")))
	p.until("the replay processed the event", `(() => { const r = document.querySelector('`+ev+` .replay-result');
		return r && r.textContent.includes("processed") && document.querySelector('`+ev+` .badge.processed') })()`)
	p.screenshot("07-replayed")
	if st := h.event(failed[0])["status"]; st != "processed" {
		t.Errorf("after the replay in the console, event %s is %v", failed[0], st)
	}

	// The user's Clerk Billing plan: none, then the item's.
	p.until("the user has no plan yet", `document.querySelector("#user-plan").textContent.includes("No Clerk Billing plan")`)
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", func(d map[string]any) {
		d["payer"].(map[string]any)["user_id"] = "user_mover0"
	}))
	p.do("open the user again", chromedp.Navigate(h.url+"/admin#/users/user_mover0"), chromedp.Reload(), chromedp.WaitVisible(css("#user-fields")))
	p.until("the user's plan shows", `(() => { const t = document.querySelector("#user-plan").textContent;
		return t.includes("team-plan") && t.includes("active") })()`)
	p.screenshot("07b-user-plan")

	// Events: the failures by reason, a look-up by svix-id, a group replayed.
	p.do("open events", chromedp.Click(css(`#nav a[data-page="events"]`)), chromedp.WaitVisible(css("#failure-groups table")),
		chromedp.WaitVisible(css("#event-list table")))
	p.until("the groups show", `document.querySelector('#failure-groups button[data-reason="email_taken"]') !== null`)
	p.screenshot("08-events")
	p.do("look up by svix-id, with the keyboard", chromedp.SendKeys(css("#ev-lookup"), failed[1]+kb.Enter),
		chromedp.WaitVisible(css(".event-detail")))
	p.screenshot("09-event")
	p.do("back to events", chromedp.Click(css(`#nav a[data-page="events"]`)),
		chromedp.WaitVisible(css(`#failure-groups button[data-reason="email_taken"]`)))
	p.do("replay the group", chromedp.Click(css(`#failure-groups button[data-reason="email_taken"]`)), chromedp.WaitVisible(css("#confirm")))
	p.until("the confirmation counts", `document.getElementById("confirm-title").textContent === "Replay 1 events"`)
	p.do("confirm", chromedp.Click(css("#confirm-ok")))
	p.until("the group is replayed", `document.getElementById("status").textContent.includes("Replayed 1: 1 processed")`)
	if st := h.event(failed[1])["status"]; st != "processed" {
		t.Errorf("after the group's replay, event %s is %v", failed[1], st)
	}
	// The log by kind, and one organization's events from its link.
	p.do("filter by kind", chromedp.SetValue(css("#ev-kind"), "organization"), chromedp.Click(css("#ev-apply")))
	p.until("only the organization's events show", `(() => { const rows = [...document.querySelectorAll("#event-list tr[data-type]")];
		return rows.length === 2 && rows.every((r) => r.dataset.type.startsWith("organization.")) && location.hash.includes("kind=organization") })()`)
	p.do("open the organization's events", chromedp.Click(css("#event-list a.object")))
	p.until("the log lists that organization's events", `(() => { const rows = [...document.querySelectorAll("#event-list tr[data-type]")];
		return rows.length === 2 && document.getElementById("ev-objectId").value === "`+fxOrg+`" })()`)
	p.screenshot("09b-events-of-an-organization")
	// The whole log, at a laptop's width and at a wide screen's: the Error
	// column stays in view, however long the ids.
	for _, width := range []int64{1280, 1600} {
		p.do("a screen's width", chromedp.EmulateViewport(width, 800), chromedp.Navigate(h.url+"/admin#/events?status=failed"),
			chromedp.WaitVisible(css("#event-list table")))
		p.until("the Error column is in view", `(() => { const w = document.querySelector("#event-list .table-wrap");
			const th = [...w.querySelectorAll("th")].pop();
			return th.textContent === "Error" && w.scrollWidth <= w.clientWidth && th.getBoundingClientRect().right <= w.getBoundingClientRect().right + 1 })()`)
	}
	p.screenshot("09c-events-wide")
	p.do("back to a laptop's width", chromedp.EmulateViewport(1280, 800))

	// The invalid event can never apply: discard it, with a reason.
	p.do("open the invalid event", chromedp.Navigate(h.url+"/admin#/events/"+badID), chromedp.WaitVisible(css(".event-detail button.discard")))
	p.until("it cannot be discarded without a reason, and replay stays offered", `!document.querySelector(".event-detail button.replay").disabled`)
	p.do("discard", chromedp.Click(css(".event-detail button.discard")), chromedp.WaitVisible(css("#discard-reason")))
	p.do("give the reason", chromedp.SendKeys(css("#discard-reason"), "data.updated_at is missing; Clerk will not resend it"),
		chromedp.Click(css("#discard-ok")))
	p.until("the event shows discarded, why and by whom", `(() => { const d = document.querySelector(".event-detail");
		return d && d.querySelector(".badge.discarded") && d.textContent.includes("Clerk will not resend it") && d.textContent.includes("key sha256:") &&
			document.querySelector(".event-detail button.replay").disabled && !document.querySelector(".event-detail button.discard") })()`)
	p.screenshot("09d-event-discarded")
	if st := h.event(badID)["status"]; st != "discarded" {
		t.Errorf("after the discard in the console, event %s is %v", badID, st)
	}

	// Reconcile: the runs, each kind's counts, and a dry run of every kind.
	p.do("open reconcile", chromedp.Click(css(`#nav a[data-page="reconcile"]`)), chromedp.WaitVisible(css("#runs table")))
	p.until("the run shows each kind it read", `(() => { const row = (o) => document.querySelector('#runs tr[data-object="' + o + '"]');
		const cells = (o) => [...row(o).querySelectorAll("td.num")].map((td) => td.textContent);
		return row("users") && cells("users").slice(0, 7).join(",") === "5,5,1,0,4,0,0" && cells("organizations").join(",") === "2,3,0,0,2,1,0" &&
			row("memberships").querySelector("td.not-read") !== null })()`)
	p.do("start a dry run", chromedp.Click(css("#dry-start")))
	p.until("the dry run is done", `document.querySelector("#dry-run .badge.done") && document.querySelector("#dry-run").textContent.includes("user_gone_from_clerk")`)
	p.until("the dry run shows each kind and its changes", `(() => { const d = document.querySelector("#dry-run");
		const cells = (o) => [...d.querySelectorAll('#dry-kinds tr[data-object="' + o + '"] td.num')].map((td) => td.textContent).join(",");
		return cells("users") === "4,4,1,0,3,1,0" && cells("organizations") === "2,3,0,0,2,1,0" && cells("memberships") === "7,6,1,0,6,0,0" &&
			d.textContent.includes("13 objects read") && d.textContent.includes("org_gone_from_clerk") && d.textContent.includes("orgmem_new_in_clerk") &&
			d.querySelector('#dry-kinds tr[data-object="subscriptionItems"]') !== null })()`)
	p.screenshot("10-reconcile")

	// A phone.
	p.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Click(css(`#nav a[data-page="overview"]`)))
	p.until("the overview shows", `document.querySelectorAll("#chart-received svg rect.bar-received").length > 50`)
	p.screenshot("11-phone-overview")
	p.do("a user on a phone", chromedp.Navigate(h.url+"/admin#/users/user_mover0"), chromedp.WaitVisible(css("#user-fields")),
		chromedp.WaitVisible(css(ev)))
	p.screenshot("12-phone-user")
	p.do("events on a phone", chromedp.Navigate(h.url+"/admin#/events"), chromedp.WaitVisible(css("#event-list table")))
	p.screenshot("13-phone-events")
	p.do("reconcile on a phone", chromedp.Navigate(h.url+"/admin#/reconcile"), chromedp.WaitVisible(css(`#runs tr[data-object="memberships"]`)))
	p.screenshot("14-phone-reconcile")

	// The key is forgotten with the tab: a new tab asks for it again.
	p.do("forget the key", chromedp.Click(css("#signout")), chromedp.WaitVisible(css("#key")))
	p.until("the key is gone", `sessionStorage.getItem("usersync.adminKey") === null`)
}
