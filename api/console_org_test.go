package api_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsole_AnOrganizationsPageShowsItsPlan: an organization's page in a
// real browser shows its fields, the Clerk Billing plan it pays for its
// members, its pending invitations (not one past its expiry, nor an
// accepted one), and its events; an event of the organization links to it.
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
	future := time.Now().Add(7 * 24 * time.Hour)
	h.mustDeliver(newID(), invitationBody(t, "openapi.organizationInvitation.created.json", "P", future))
	h.mustDeliver(newID(), bytes.ReplaceAll(invitationBody(t, "openapi.organizationInvitation.created.json", "X", time.Time{}),
		[]byte("jane.doe@acme.com"), []byte("expired@acme.com")))
	h.mustDeliver(newID(), bytes.ReplaceAll(invitationBody(t, "openapi.organizationInvitation.accepted.json", "A", future),
		[]byte("jane.doe@acme.com"), []byte("accepted@acme.com")))
	p := &page{t: t, ctx: ctx, dir: screenshotDir(t)}
	p.do("open the console", chromedp.Navigate(h.url+"/admin"), chromedp.WaitVisible(css("#key")),
		chromedp.SetValue(css("#key"), testAdminKey), chromedp.Click(css("#login-form button")))
	p.do("open the organization", chromedp.WaitVisible(css(`#nav a[data-page="events"]`)),
		chromedp.Navigate(h.url+"/admin#/organizations/"+org), chromedp.WaitVisible(css("#org-fields")))
	p.until("its fields show", `document.getElementById("org-fields").textContent.includes("acme-corp")`)
	p.until("the plan it pays shows", `(() => { const t = document.getElementById("org-plan").textContent;
		return t.includes("team-plan") && t.includes("active") })()`)
	p.until("its pending invitations list", `(() => { const t = document.getElementById("org-invitations").textContent;
		return t.includes("jane.doe@acme.com") && t.includes("orginv_2g7np7Hrk0SN6kj5EDMLDaKNL0SP") && !t.includes("expired@") && !t.includes("accepted@") })()`)
	p.until("its events list", `document.getElementById("org-events").textContent.includes("organization.created")`)
	p.screenshot("30-organization")
}
