package api_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsole_AnOrganizationsPageShowsItsPlan: an organization's page in a
// real browser shows its fields, the Clerk Billing plan it pays for its
// members, and its events; an event of the organization links to it.
func TestConsole_AnOrganizationsPageShowsItsPlan(t *testing.T) {
	// Not parallel: one more browser beside the parallel tests' one is
	// too much for a 2-core machine running the suite on a database engine.
	ctx := browser(t)
	h := newHarness(t)
	const org = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S"
	h.mustDeliver(newID(), fixture(t, "openapi.organization.created.json"))
	h.mustDeliver(newID(), billingBody(t, "plan-change.2.subscriptionItem.active.json", "", func(d map[string]any) {
		d["payer"].(map[string]any)["user_id"], d["payer"].(map[string]any)["organization_id"] = "", org
	}))
	p := &page{t: t, ctx: ctx, dir: screenshotDir(t)}
	p.do("open the console", chromedp.Navigate(h.url+"/admin"), chromedp.WaitVisible(css("#key")),
		chromedp.SetValue(css("#key"), testAdminKey), chromedp.Click(css("#login-form button")))
	p.do("open the organization", chromedp.WaitVisible(css(`#nav a[data-page="events"]`)),
		chromedp.Navigate(h.url+"/admin#/organizations/"+org), chromedp.WaitVisible(css("#org-fields")))
	p.until("its fields show", `document.getElementById("org-fields").textContent.includes("acme-corp")`)
	p.until("the plan it pays shows", `(() => { const t = document.getElementById("org-plan").textContent;
		return t.includes("team-plan") && t.includes("active") })()`)
	p.until("its events list", `document.getElementById("org-events").textContent.includes("organization.created")`)
	p.screenshot("30-organization")
}
