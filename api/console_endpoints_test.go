package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/usersync/usersync/models"
)

// setStatus makes the receiver answer code (0: 204).
func (r *appReceiver) setStatus(code int) {
	r.mu.Lock()
	r.status = code
	r.mu.Unlock()
}

// summary lists the types and webhook-ids of messages.
func summary(ms []message) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "[%s %s] ", m.Type, m.ID)
	}
	return b.String()
}

// eval is the value of a JavaScript expression on the page.
func (p *page) eval(what, expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestConsole_EndpointsInABrowser drives the console's Endpoints view in
// Chromium against the real server and an app's endpoint on loopback that
// verifies every message with svix: an endpoint registered through the
// page, its secret shown once and verifying; a test event delivered; a
// user's change delivered, its attempt with the status code the app
// answered, and replayed from the page with the same webhook-id; a failure,
// shown with the failures only and grouped by endpoint on the list; replay
// since a time; disable and enable; a rotation showing the new secret once;
// the deletion. No page shows a secret but the answer that made it.
func TestConsole_EndpointsInABrowser(t *testing.T) {
	// Not parallel: one more browser beside the parallel tests' one is
	// too much for a 2-core machine running the suite on a database engine.
	ctx := browser(t)
	h := newHarness(t, func(o *harnessOptions) { o.outbound = true })
	app := newAppReceiver(t)
	u, err := url.Parse(app.url)
	if err != nil {
		t.Fatal(err)
	}
	p := &page{t: t, ctx: ctx, dir: screenshotDir(t)}

	p.do("open the console", chromedp.Navigate(h.url+"/admin"), chromedp.WaitVisible(css("#key")),
		chromedp.SetValue(css("#key"), testAdminKey), chromedp.Click(css("#login-form button")))
	p.do("open endpoints", chromedp.WaitVisible(css(`#nav a[data-page="endpoints"]`)), chromedp.Click(css(`#nav a[data-page="endpoints"]`)),
		chromedp.WaitVisible(css("#ep-url")))
	p.until("there is none yet", `document.getElementById("endpoint-list").textContent.includes("No endpoint yet")`)

	// Register the app's endpoint: the secret shows once, in a box to copy.
	p.do("register", chromedp.SetValue(css("#ep-url"), app.url), chromedp.SetValue(css("#ep-types"), "user.*"),
		chromedp.SetValue(css("#ep-desc"), "the app"), chromedp.Click(css("#ep-create")))
	p.until("the secret shows, with a warning", `(() => { const b = document.getElementById("secret-box");
		return b && b.textContent.includes("not shown again") && document.getElementById("secret-value").value.startsWith("whsec_") })()`)
	p.screenshot("20-endpoint-registered")
	secret := p.eval("read the secret", `document.getElementById("secret-value").value`)
	app.setSecrets(secret)
	h.step() // the dispatcher reads the endpoints, as it does on each of its rounds
	p.until("the endpoint is listed: its host, types, state, source and backlog", `(() => {
		const row = document.querySelector("#endpoint-list tr[data-endpoint]");
		return row && row.textContent.includes("`+u.Host+`") && row.textContent.includes("user.*") &&
			row.querySelector(".badge.enabled") && row.textContent.includes("API") && row.querySelector(".ep-backlog").textContent === "0" })()`)
	id := p.eval("read the id", `document.querySelector("#endpoint-list tr[data-endpoint]").dataset.endpoint`)
	p.do("hide the secret", chromedp.Click(css("#secret-box button.quiet")))
	p.until("the secret is gone from the page", `!document.body.innerText.includes("`+secret+`") && !document.getElementById("secret-value")`)

	// A test event, sent from the endpoint's page, is delivered.
	p.do("open the endpoint", chromedp.Click(css(`#endpoint-list a[href="#/endpoints/`+id+`"]`)), chromedp.WaitVisible(css("#ep-fields")))
	p.until("the page shows no secret", `!document.body.innerText.includes("whsec_")`)
	p.do("send a test event", chromedp.Click(css("#ep-test")))
	p.until("the test event is delivered", `(() => { const r = document.getElementById("ep-test-result");
		return r && r.textContent.includes("Delivered: HTTP 204") })()`)
	p.screenshot("21-endpoint-test")
	if ms := app.messages(); len(ms) != 1 || ms[0].Type != "usersync.test" {
		t.Fatalf("the app received %s, want the test event", summary(ms))
	}

	// A user's change reaches the app; the page shows the attempt.
	base := time.Now().Add(-time.Hour).UnixMilli()
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: "user_consoleob", UpdatedAt: base, Email: "ob@example.com", First: "Ob"}))
	h.step()
	p.do("refresh", chromedp.Click(css("#ep-attempts-refresh")))
	p.until("the attempt shows, delivered with the app's status code", `(() => {
		const row = [...document.querySelectorAll("#ep-attempts tr[data-attempt]")].find((r) => r.textContent.includes("user.created"));
		return row && row.querySelector(".attempt-status").textContent === "204" && row.querySelector(".badge.delivered") &&
			row.textContent.includes("user_consoleob") })()`)
	p.until("the delivery shows, with the one attempt it took", `(() => { const row = document.querySelector('#ep-deliveries tr[data-object="user_consoleob"]');
		return row && row.querySelector(".badge.delivered") !== null && row.querySelector(".delivery-attempts").textContent === "1" })()`)
	p.screenshot("22-endpoint-attempts")

	// Replayed from the page: sent again, whole, with its webhook-id.
	p.do("replay the delivery", chromedp.Click(css(`#ep-deliveries tr[data-object="user_consoleob"] button.replay-delivery`)))
	p.until("the replay is requeued", `document.getElementById("ep-result").textContent.includes("1 requeued")`)
	h.step()
	ms := app.messages()
	if len(ms) != 3 || ms[1].Type != "user.created" || ms[2].ID != ms[1].ID || ms[2].Type != "user.created" {
		t.Fatalf("the app received %s; want the user's creation, then its replay with the same webhook-id", summary(ms))
	}

	// Replay since an hour ago: every delivery last attempted since then
	// (not one still pending) is sent again.
	p.eval("pick an hour ago", `(() => { const d = new Date(Date.now() - 3600e3), pad = (n) => String(n).padStart(2, "0");
		document.getElementById("ep-since").value = d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
		return "" })()`)
	p.do("replay since", chromedp.Click(css("#ep-replay-since-go")), chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm-ok")))
	p.until("the replay since is requeued", `document.getElementById("ep-result").textContent.startsWith("Replay since") && document.getElementById("ep-result").textContent.endsWith(": 1 requeued.")`)
	h.step()
	ms = app.messages()
	if len(ms) != 4 || ms[3].ID != ms[1].ID || ms[3].Type != "user.created" {
		t.Fatalf("the app received %s; want the user's creation again, with the same webhook-id", summary(ms))
	}

	// The app fails: the failure shows, alone with "failures only".
	app.setStatus(http.StatusInternalServerError)
	h.mustDeliver(newID(), userBody(t, "user.updated", clerkUser{ID: "user_consoleob", UpdatedAt: base + 1000, Email: "ob2@example.com", First: "Ob"}))
	h.step()
	p.do("only failures", chromedp.Click(css("#ep-failed-only")))
	p.until("only the failure shows, with its status code", `(() => {
		const rows = [...document.querySelectorAll("#ep-attempts tr[data-attempt]")];
		return rows.length > 0 && rows.every((r) => r.querySelector(".attempt-status").textContent === "500" && r.querySelector(".badge.failed")) })()`)
	failedRows := p.eval("count the failures", `String(document.querySelectorAll("#ep-attempts tr[data-attempt]").length)`)
	p.screenshot("23-endpoint-failures")
	p.do("back to the list", chromedp.Click(css(`#nav a[data-page="endpoints"]`)), chromedp.WaitVisible(css("#endpoint-list table")))
	p.until("the failures are grouped by endpoint", `(() => {
		const row = document.querySelector('#endpoint-failures tr[data-endpoint="`+id+`"][data-reason="HTTP 500"]');
		return row && row.querySelector("td.num").textContent === "`+failedRows+`" })()`)
	p.until("the list shows what waits and since when it fails", `(() => {
		const row = document.querySelector('#endpoint-list tr[data-endpoint="`+id+`"]');
		return row.querySelector(".ep-backlog").textContent === "1" && row.textContent.includes(" ago") })()`)
	p.screenshot("24-endpoints-failing")
	app.setStatus(0)
	p.do("open the endpoint", chromedp.Click(css(`#endpoint-list a[href="#/endpoints/`+id+`"]`)), chromedp.WaitVisible(css("#ep-toggle")))

	// Disable, enable.
	p.do("disable", chromedp.Click(css("#ep-toggle")), chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm-ok")))
	p.until("it shows disabled", `document.querySelector("#ep-fields .badge.disabled") !== null && document.getElementById("ep-toggle").textContent === "Enable"`)
	p.do("enable", chromedp.Click(css("#ep-toggle")))
	p.until("it shows enabled", `document.querySelector("#ep-fields .badge.enabled") !== null`)

	// Rotate: the new secret shows once, and signs.
	p.do("rotate", chromedp.Click(css("#ep-rotate")), chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm-ok")))
	p.until("the new secret shows", `(() => { const v = document.getElementById("secret-value");
		return v && v.value.startsWith("whsec_") && v.value !== "`+secret+`" })()`)
	p.screenshot("25-endpoint-rotated")
	rotated := p.eval("read the new secret", `document.getElementById("secret-value").value`)
	app.setSecrets(secret, rotated)
	p.do("send a test event", chromedp.Click(css("#ep-test")))
	p.until("the test event is delivered with both signatures", `(() => { const r = document.getElementById("ep-test-result");
		return r && r.textContent.includes("Delivered: HTTP 204") })()`)
	if strings.Contains(p.eval("read the page", `document.body.innerText`), rotated) {
		t.Error("the page still shows the rotated secret after the test event")
	}

	// Resync: started from the page, done by the dispatcher's rounds.
	p.do("resync", chromedp.Click(css("#ep-resync-start")), chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm-ok")))
	p.until("the resync shows", `(() => { const r = document.getElementById("ep-resync"); return r && r.textContent.includes("under way") })()`)
	for range len(models.ResyncKinds) + 1 { // a page a round: a kind each here
		h.step()
	}
	p.do("reload the endpoint", chromedp.Click(css(`#nav a[data-page="endpoints"]`)), chromedp.WaitVisible(css("#endpoint-list table")),
		chromedp.Click(css(`#endpoint-list a[href="#/endpoints/`+id+`"]`)), chromedp.WaitVisible(css("#ep-toggle")))
	p.until("the resync is done", `(() => { const r = document.getElementById("ep-resync"); return r && r.textContent.includes("done") })()`)

	// A payer's plan between a plan change's two events waits to be sent,
	// and the page says why.
	r := h.send(http.MethodPost, "/v1/endpoints", `{"url": "`+app.url+`", "eventTypes": ["plan.*"]}`)
	if r.Code != http.StatusCreated {
		t.Fatalf("register the plans' endpoint: %s", r)
	}
	planEP := r.JSON(t)["id"].(string)
	h.step()
	h.mustDeliver(newID(), userBody(t, "user.created", clerkUser{ID: billingUser, UpdatedAt: base}))
	h.mustDeliver(newID(), billingBody(t, "plan-change.1.subscriptionItem.ended.json", "", nil))
	h.step()
	p.do("open the plans' endpoint", chromedp.Navigate(h.url+"/admin#/endpoints/"+planEP), chromedp.WaitVisible(css("#ep-deliveries table")))
	p.until("the plan's delivery waits for the plan to settle", `(() => { const row = document.querySelector('#ep-deliveries tr[data-kind="plan"]');
		return row !== null && row.querySelector(".delivery-next").textContent.includes("waits for the plan to settle") })()`)
	if r := h.send(http.MethodDelete, "/v1/endpoints/"+planEP, ""); r.Code != http.StatusNoContent {
		t.Fatalf("delete the plans' endpoint: %s", r)
	}

	// An endpoint from the configuration file is shown, read-only, and
	// without its secret; on plain http, it is marked so.
	cfgSecret := "whsec_" + strings.Repeat("Q", 43) + "="
	if err := h.store.Outbound().CreateEndpoint(context.Background(), models.Endpoint{ID: "cfg_crm", URL: "http://crm.example.com/hooks",
		Secret: cfgSecret, FromConfig: true, EventTypes: []string{"user.created"}, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	p.do("open the endpoints", chromedp.Click(css(`#nav a[data-page="endpoints"]`)), chromedp.WaitVisible(css(`#endpoint-list tr[data-endpoint="cfg_crm"]`)))
	p.until("the configured endpoint is listed as such, disabled by an admin", `(() => { const row = document.querySelector('#endpoint-list tr[data-endpoint="cfg_crm"]');
		return row.textContent.includes("configuration") && row.textContent.includes("crm.example.com") && !row.textContent.includes("/hooks") &&
			row.querySelector(".badge.disabled") !== null && row.querySelector(".badge.plain-http") !== null })()`)
	p.do("open it", chromedp.Click(css(`#endpoint-list a[href="#/endpoints/cfg_crm"]`)), chromedp.WaitVisible(css("#ep-fields")))
	p.until("it cannot be changed here, and shows no secret", `document.getElementById("ep-toggle").disabled && document.getElementById("ep-rotate").disabled &&
		document.getElementById("ep-delete").disabled && document.body.innerText.includes("USERSYNC_ENDPOINTS_FILE") && !document.body.innerText.includes("whsec_") &&
		document.getElementById("ep-fields").innerText.includes("USERSYNC_ENDPOINTS_ALLOW_HTTP")`)
	p.do("back to the app's endpoint", chromedp.Navigate(h.url+"/admin#/endpoints/"+id), chromedp.WaitVisible(css("#ep-delete:not([disabled])")))

	// A phone.
	p.do("a phone's screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(h.url+"/admin#/endpoints"), chromedp.WaitVisible(css("#endpoint-list table")))
	p.screenshot("26-phone-endpoints")
	p.do("an endpoint on a phone", chromedp.Navigate(h.url+"/admin#/endpoints/"+id), chromedp.WaitVisible(css("#ep-deliveries table")))
	p.screenshot("27-phone-endpoint")
	p.do("back to a laptop's width", chromedp.EmulateViewport(1280, 800), chromedp.WaitVisible(css("#ep-delete")))

	// Delete: the list has the configured endpoint only.
	p.do("delete", chromedp.Click(css("#ep-delete")), chromedp.WaitVisible(css("#confirm")), chromedp.Click(css("#confirm-ok")))
	p.until("the endpoint is gone", `location.hash === "#/endpoints" && document.getElementById("status").textContent.includes("Deleted `+id+`") &&
		[...document.querySelectorAll("#endpoint-list tr[data-endpoint]")].map((r) => r.dataset.endpoint).join() === "cfg_crm"`)
	if r := h.get("/v1/endpoints/"+id, testAdminKey); r.Code != http.StatusNotFound {
		t.Errorf("after the deletion in the console, the endpoint reads %s", r)
	}
}
