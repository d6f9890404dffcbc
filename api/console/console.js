// usersync console: plain JavaScript, no library, no build step.
//
// The page holds no data: everything comes from the /v1 API of the server
// that served it, with the admin key typed in once and kept in this tab's
// sessionStorage. Every string from the API is rendered as text
// (textContent, text nodes), never parsed as HTML.
"use strict";

(function () {
  const KEY = "usersync.adminKey";
  const KINDS = ["received", "applied", "stale", "deleted", "ignored", "activity", "failed"];
  const OUTCOMES = ["applied", "stale", "deleted", "ignored", "activity", "failed"];
  const KIND_LABEL = { received: "received", applied: "applied", stale: "stale", deleted: "deleted", ignored: "ignored", activity: "activity", failed: "failed" };
  const KIND_TITLE = { deleted: "an event of a deleted user, organization or membership, or of a membership of a deleted organization or user" +
    " (changed in this version: a deleted user's events were counted apart, as deleted_user; they are counted here now)",
    ignored: "an event of a billing type usersync does not know (stored, never applied), or a session event of a user the copy does not know yet",
    activity: "a session event that moved only its user's last activity" };
  // The kinds of objects reconcile counts, as the runs and dry runs name them.
  const OBJECTS = ["users", "organizations", "memberships", "invitations", "subscriptionItems"];
  const OBJECT_NAMES = { subscriptionItems: "subscription items" };
  const objectName = (o) => OBJECT_NAMES[o] || o;

  // ---- DOM building -----------------------------------------------------

  // h builds an element: attrs are properties or attributes (on* are
  // listeners), children are nodes or strings (text).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
      else if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k in el && typeof v !== "string") el[k] = v;
      else el.setAttribute(k, v === true ? "" : String(v));
    }
    append(el, children);
    return el;
  }
  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    for (const c of children) el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }
  // put appends children to el as append does, arrays flattened and
  // null, undefined and false left out (DOM append would write them).
  function put(el, ...children) { return append(el, children); }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); return el; }
  const $ = (id) => document.getElementById(id);

  // ---- times --------------------------------------------------------------

  const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  const shortFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
  const dayFmt = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric" });

  // when shows an RFC 3339 time in the viewer's zone, with UTC on hover.
  function when(iso, opts) {
    if (!iso) return h("span", { class: "muted" }, "—");
    const d = new Date(iso);
    if (isNaN(d)) return h("span", {}, iso);
    const text = opts && opts.ago ? ago(d) : dateFmt.format(d);
    return h("time", { datetime: iso, title: d.toISOString().replace(".000Z", "Z") + " (UTC)" + (opts && opts.ago ? " · " + dateFmt.format(d) : "") }, text);
  }
  function ago(d) {
    let sec = Math.round((Date.now() - d.getTime()) / 1000);
    if (sec < 0) sec = 0;
    if (sec < 60) return sec + " s ago";
    if (sec < 3600) return Math.floor(sec / 60) + " min ago";
    if (sec < 86400) return Math.floor(sec / 3600) + " h " + Math.floor((sec % 3600) / 60) + " min ago";
    return Math.floor(sec / 86400) + " d ago";
  }
  // toISO turns the value of a datetime-local input (the viewer's zone)
  // into RFC 3339 UTC.
  function toISO(local) { return local ? new Date(local).toISOString() : ""; }
  function toLocalInput(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    const pad = (n) => String(n).padStart(2, "0");
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + "T" + pad(d.getHours()) + ":" + pad(d.getMinutes());
  }
  const num = (n) => (n === undefined || n === null ? "—" : Number(n).toLocaleString());

  // ---- the API --------------------------------------------------------------

  class APIError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  function key() { try { return sessionStorage.getItem(KEY) || ""; } catch (e) { return ""; } }

  // api calls the /v1 API with the key; params go to the query string.
  async function api(method, path, params, withKey, send) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== "" && v !== undefined && v !== null && v !== false) q.set(k, String(v));
    const url = path + (q.toString() ? "?" + q : "");
    const headers = { Authorization: "Bearer " + (withKey || key()), Accept: "application/json" };
    if (send !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(url, {
      method, headers, body: send === undefined ? undefined : JSON.stringify(send),
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const err = (body && body.error) || {};
      const e = new APIError(res.status, err.code || "error", err.message || res.statusText || "request failed");
      if (res.status === 401 && !withKey) signOut("The server refused the key: " + e.message);
      throw e;
    }
    return body;
  }

  function say(msg, isError) {
    const st = $("status");
    st.textContent = msg || "";
    st.className = isError ? "error" : "";
  }
  function fail(e) { say(e instanceof APIError ? e.message + " (" + e.status + " " + e.code + ")" : String(e), true); }

  // ---- sign in ------------------------------------------------------------------

  function keyMessage(e) {
    if (e.status === 401) return "This key is not known to this server. Check USERSYNC_ADMIN_KEYS.";
    if (e.status === 403) return "This is an API key: the console needs an admin key (one of USERSYNC_ADMIN_KEYS).";
    return "The server did not accept the key: " + e.message;
  }

  async function signIn(ev) {
    ev.preventDefault();
    const input = $("key");
    const k = input.value.trim();
    $("login-error").textContent = "";
    if (!k) return;
    try {
      await api("GET", "/v1/admin/overview", {}, k);
    } catch (e) {
      $("login-error").textContent = e instanceof APIError ? keyMessage(e) : "The server did not answer: " + e;
      input.focus();
      return;
    }
    try { sessionStorage.setItem(KEY, k); } catch (e) { /* private mode: the key lives until reload */ }
    input.value = "";
    route();
  }

  function signOut(msg) {
    try { sessionStorage.removeItem(KEY); } catch (e) { /* nothing kept */ }
    showLogin(msg || "");
  }

  function showLogin(msg) {
    stopTimers();
    $("nav").hidden = true;
    $("signout").hidden = true;
    clear($("page"));
    say("");
    $("login").hidden = false;
    $("login-error").textContent = msg || "";
    $("key").focus();
  }

  // ---- confirmation -----------------------------------------------------------------

  function confirmDialog(title, text, okLabel, danger) {
    const d = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    const ok = $("confirm-ok");
    ok.textContent = okLabel || "Confirm";
    ok.className = danger ? "danger" : "";
    return new Promise((resolve) => {
      d.returnValue = "cancel";
      d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
      d.showModal();
      $("confirm-cancel").focus();
    });
  }

  // discardDialog asks why an event is discarded: the reason, or null.
  function discardDialog(title) {
    const d = $("discard");
    $("discard-title").textContent = title;
    const reason = $("discard-reason");
    reason.value = "";
    return new Promise((resolve) => {
      d.returnValue = "cancel";
      d.addEventListener("close", () => resolve(d.returnValue === "ok" && reason.value.trim() ? reason.value.trim() : null), { once: true });
      d.showModal();
      reason.focus();
    });
  }

  // ---- routing -----------------------------------------------------------------------

  let timers = [];
  function stopTimers() { timers.forEach(clearInterval); timers = []; }

  // byKind lists the kinds with events of field (stats' kind: {user:
  // {stored, failed, gaveUp}, …}): " · 2 user, 1 membership", or "".
  function byKind(kinds, field) {
    const parts = Object.entries(kinds || {}).filter(([, c]) => c[field] > 0).map(([k, c]) => num(c[field]) + " " + k);
    return parts.length ? " · " + parts.join(", ") : "";
  }

  function route() {
    stopTimers();
    if (!key()) { showLogin(""); return; }
    $("login").hidden = true;
    $("nav").hidden = false;
    $("signout").hidden = false;
    say("");
    const path = location.hash.replace(/^#\/?/, "").split("?")[0];
    const [page, ...rest] = path.split("/");
    const arg = decodeURIComponent(rest.join("/"));
    for (const a of document.querySelectorAll("#nav a")) {
      if (a.dataset.page === (page || "overview")) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    const root = clear($("page"));
    const views = { "": overview, overview, users: arg ? userPage : users, events: arg ? eventPage : events, reconcile,
      endpoints: arg ? endpointPage : endpoints, organizations: arg ? organizationPage : overview };
    (views[page] || overview)(root, arg);
  }

  // ---- overview -----------------------------------------------------------------------

  function card(label, value, sub, tone, id) {
    return h("div", { class: "card" + (tone ? " " + tone : ""), id }, h("div", { class: "label" }, label),
      h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
  }

  function overview(root) {
    document.title = "Overview · usersync";
    const cards = h("div", { class: "cards", id: "overview-cards" }, h("p", { class: "muted" }, "Loading…"));
    const chartPanel = h("div", { class: "panel" });
    put(root, h("h1", {}, "Overview"), cards, chartPanel);
    let range = "hour";
    const load = async () => {
      try {
        const o = await api("GET", "/v1/admin/overview");
        renderCards(cards, o);
      } catch (e) { if (key()) fail(e); }
    };
    const loadChart = () => drawActivity(chartPanel, range, (r) => { range = r; loadChart(); });
    load();
    loadChart();
    timers.push(setInterval(() => { if (!document.hidden) { load(); loadChart(); } }, 30000));
  }

  function renderCards(cards, o) {
    clear(cards);
    const ev = o.events;
    const rec = o.reconcile || {};
    const last = rec.lastRun;
    put(cards, 
      card("Database", o.ready.ok ? "ready" : "not ready", o.ready.error || "/readyz", o.ready.ok ? "good" : "bad", "card-ready"),
      card("Last webhook", o.lastWebhookAt ? when(o.lastWebhookAt, { ago: true }) : "none yet", "to this instance since it started"),
      ev ? card("Backlog", num(ev.backlog), "stored, and failed to retry", ev.backlog > 0 ? "warn" : "", "card-backlog") : card("Events", "unknown", o.eventsError, "bad"),
      ev ? card("Failed", num(ev.status.failed), num(ev.gaveUp) + " given up" + byKind(ev.kind, "failed"), ev.status.failed > 0 ? "bad" : "", "card-failed") : null,
      ev ? card("Given up", num(ev.gaveUp), "wait for an operator", ev.gaveUp > 0 ? "bad" : "") : null,
      ev ? card("Processed", num(ev.status.processed), num(ev.outcome.applied) + " applied, " + num(ev.outcome.stale) + " stale, " +
        num(ev.outcome.deleted) + " deleted", "", "card-processed") : null,
      card("Last sweep", o.sweep.lastSuccessAt ? when(o.sweep.lastSuccessAt, { ago: true }) : "not yet", "by this instance"),
      card("Last retention", o.retention.lastSuccessAt ? when(o.retention.lastSuccessAt, { ago: true }) : "not yet",
        o.retention.lastSuccessAt ? num(o.retention.lastDeleted) + " events deleted" : "off, or not run yet"),
      card("Last reconcile", last ? when(last.startedAt, { ago: true }) : "none recorded",
        last ? (last.success ? "" : "FAILED · ") + runSummary(last) : (rec.lastRunError || (rec.dryRunAvailable ? "" : "CLERK_SECRET_KEY not set")),
        last && !last.success ? "bad" : "", "card-reconcile"),
    );
    if (ev && ev.stale) put(cards, card("Counts", "stale", "as of " + new Date(ev.asOf).toLocaleString() + ": the database did not answer", "warn"));
    put(cards, card("Build", o.build.version, o.build.revision.slice(0, 12)));
  }

  // runSummary says what a run did to each kind it read.
  function runSummary(r) {
    const parts = OBJECTS.filter((o) => r[o]).map((o) =>
      objectName(o) + ": " + num(r[o].clerk) + " in Clerk, " + num(r[o].applied) + " applied, " + num(r[o].deleted) + " deleted, " + num(r[o].failed) + " failed");
    return parts.length ? parts.join(" · ") : "nothing read";
  }

  // drawActivity draws the charts of one range into panel.
  async function drawActivity(panel, range, pick) {
    let a;
    try {
      a = await api("GET", "/v1/admin/activity", { range });
    } catch (e) {
      put(clear(panel), h("p", { class: "error" }, "Activity: " + e.message));
      return;
    }
    clear(panel);
    const tabs = h("div", { class: "tabs", role: "group", "aria-label": "Chart range" },
      ["hour", "day", "week"].map((r) => h("button", { type: "button", "aria-pressed": String(r === range), onclick: () => pick(r) }, "Last " + r)));
    const step = a.stepSeconds >= 3600 ? "hour" : a.stepSeconds >= 900 ? "15 minutes" : "minute";
    put(panel, h("h2", {}, "Activity"), tabs,
      h("p", { class: "muted" }, "Per " + step + ", from counters kept per " + (a.bucketSeconds >= 3600 ? "hour" : "minute") + ". Totals: ",
        KINDS.map((k, i) => [i ? ", " : "", num(a.totals[k]) + " " + KIND_LABEL[k]])),
      h("div", { class: "charts" },
        h("div", { class: "chart", id: "chart-received" }, h("h3", {}, "Events received"), chart(a, ["received"], "Events received per " + step)),
        h("div", { class: "chart", id: "chart-outcomes" }, h("h3", {}, "Outcomes"), chart(a, OUTCOMES, "Processing outcomes per " + step),
          h("div", { class: "legend" }, OUTCOMES.map((k) => h("span", { class: "k-" + k, title: KIND_TITLE[k] }, KIND_LABEL[k]))))));
  }

  // chart is a bar chart of the points of a, the kinds stacked, as SVG.
  function chart(a, kinds, label) {
    const W = 640, H = 190, L = 40, B = 22, T = 8, R = 8;
    const pts = a.points;
    const totals = pts.map((p) => kinds.reduce((t, k) => t + (p.counts[k] || 0), 0));
    const top = niceMax(Math.max(1, ...totals));
    const bw = (W - L - R) / pts.length;
    const y = (v) => T + (H - T - B) * (1 - v / top);
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label + ": " + totals.reduce((x, v) => x + v, 0) + " in all, at most " + Math.max(...totals) + " in one" });
    put(svg, s("line", { class: "axis", x1: L, y1: y(0), x2: W - R, y2: y(0) }), s("line", { class: "axis", x1: L, y1: y(top), x2: W - R, y2: y(top) }),
      s("text", { x: L - 4, y: y(top) + 4, "text-anchor": "end" }, String(top)), s("text", { x: L - 4, y: y(0) + 4, "text-anchor": "end" }, "0"));
    pts.forEach((p, i) => {
      let base = 0;
      const x = L + i * bw;
      const g = s("g", {});
      for (const k of kinds) {
        const v = p.counts[k] || 0;
        if (!v) continue;
        put(g, s("rect", { class: "bar-" + k, x: x + bw * 0.1, width: Math.max(bw * 0.8, 0.8), y: y(base + v), height: y(base) - y(base + v) }));
        base += v;
      }
      // The whole column carries the tooltip: the point's time and counts.
      const d = new Date(p.start);
      put(g, s("rect", { x, y: T, width: bw, height: H - T - B, fill: "transparent" },
        s("title", {}, dateFmt.format(d) + " — " + kinds.map((k) => KIND_LABEL[k] + " " + (p.counts[k] || 0)).join(", "))));
      put(svg, g);
    });
    const ticks = 6;
    for (let t = 0; t <= ticks; t++) {
      const i = Math.min(pts.length - 1, Math.round((t * (pts.length - 1)) / ticks));
      const d = new Date(pts[i].start);
      const anchor = t === 0 ? "start" : t === ticks ? "end" : "middle";
      const tx = t === 0 ? L + i * bw : t === ticks ? L + (i + 1) * bw : L + i * bw + bw / 2;
      put(svg, s("text", { x: tx, y: H - 6, "text-anchor": anchor },
        a.range === "week" ? dayFmt.format(d) + " " + shortFmt.format(d) : shortFmt.format(d)));
    }
    return svg;
  }
  function niceMax(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  // ---- pagination ---------------------------------------------------------------------

  // pager keeps the cursors of the pages seen, so that Previous goes back
  // without reading more than one API page at a time.
  function pager(load) {
    const cursors = [""];
    let next = null;
    const prev = h("button", { type: "button", class: "quiet", disabled: true, onclick: () => { cursors.pop(); go(); } }, "← Previous");
    const nextB = h("button", { type: "button", class: "quiet", disabled: true, onclick: () => { cursors.push(next); go(); } }, "Next →");
    const where = h("span", { class: "muted" });
    const el = h("div", { class: "pager" }, prev, nextB, where);
    async function go() {
      prev.disabled = nextB.disabled = true;
      try {
        next = await load(cursors[cursors.length - 1]);
      } catch (e) { fail(e); next = null; }
      prev.disabled = cursors.length < 2;
      nextB.disabled = !next;
      where.textContent = "page " + cursors.length;
    }
    return { el, reset() { cursors.length = 1; cursors[0] = ""; return go(); } };
  }

  function table(head, rows, empty) {
    if (!rows.length) return h("p", { class: "muted" }, empty || "Nothing.");
    return h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, head.map((c) => h("th", { class: c.endsWith("#") ? "num" : "" }, c.replace(/#$/, ""))))),
      h("tbody", {}, rows)));
  }
  const badge = (v) => (v ? h("span", { class: "badge " + v }, v.replace("_", " ")) : "");
  // clip shows v on one line, cut to n characters wide; all of it on hover.
  const clip = (v, n, cls) => h("span", { class: "clip" + (cls ? " " + cls : ""), title: v || "", "data-width": n }, v || "");

  // ---- users --------------------------------------------------------------------------

  function users(root) {
    document.title = "Users · usersync";
    const q = h("input", { id: "user-q", type: "search", placeholder: "user_… or email", autocomplete: "off", size: 30 });
    const del = h("input", { id: "user-deleted", type: "checkbox" });
    const list = h("div", { id: "user-list" });
    const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); find(); } },
      h("div", {}, h("label", { for: "user-q" }, "User id or email"), q),
      h("label", { class: "inline" }, del, "Include deleted users"),
      h("button", { type: "submit", id: "user-find" }, "Find"));
    let filter = {};
    const p = pager(async (cursor) => {
      const page = await api("GET", "/v1/users", Object.assign({ limit: 25, cursor }, filter));
      put(clear(list), table(["User", "Email", "Name", "Updated", "Status"], page.data.map((u) =>
        h("tr", {},
          h("td", {}, h("a", { href: "#/users/" + encodeURIComponent(u.userId), class: "mono" }, u.userId)),
          h("td", {}, clip(u.email, 40)), h("td", {}, clip(u.displayName)),
          h("td", {}, when(u.updatedAt)), h("td", {}, u.deletedAt ? badge("deleted") : "active"))), "No user matches."));
      return page.nextCursor;
    });
    async function find() {
      const v = q.value.trim();
      if (v && !v.includes("@")) { location.hash = "#/users/" + encodeURIComponent(v); return; }
      filter = { email: v.toLowerCase(), includeDeleted: del.checked };
      await p.reset();
    }
    put(root, h("h1", {}, "Users"), form, list, p.el);
    find();
    q.focus();
  }

  function userPage(root, userId) {
    document.title = userId + " · usersync";
    const head = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const evs = h("div", { id: "user-events" });
    const plan = h("div", { id: "user-plan" });
    put(root, h("p", {}, h("a", { href: "#/users" }, "← Users")), h("h1", { class: "mono" }, userId), head,
      h("h2", {}, "Clerk Billing plan"), plan, h("h2", {}, "Events, newest first"), evs);
    const load = async () => {
      let u;
      try {
        u = await api("GET", "/v1/users/" + encodeURIComponent(userId), { includeDeleted: true });
      } catch (e) {
        put(clear(head), h("p", { class: e.status === 404 ? "muted" : "error" }, e.status === 404 ? "This user is not stored here (events may still name it)." : e.message),
          userActions(null, userId, load));
        return;
      }
      put(clear(head), userFields(u), userActions(u, userId, load));
      try {
        put(clear(plan), planFields(await api("GET", "/v1/users/" + encodeURIComponent(userId) + "/billing")));
      } catch (e) {
        put(clear(plan), h("p", { class: "error" }, e.message));
      }
    };
    load();
    const p = pager(async (cursor) => {
      const page = await api("GET", "/v1/events", { userId, limit: 20, cursor });
      put(clear(evs), page.data.length ? page.data.map(eventRow) : h("p", { class: "muted" }, "No events for this user."));
      return page.nextCursor;
    });
    put(root, p.el);
    p.reset();
  }

  // organizationPage shows one organization: its fields, its Clerk Billing
  // plan (an organization pays for its members), its pending invitations
  // and its events.
  function organizationPage(root, orgId) {
    document.title = orgId + " · usersync";
    const head = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const plan = h("div", { id: "org-plan" });
    const invs = h("div", { id: "org-invitations" });
    const evs = h("div", { id: "org-events" });
    put(root, h("p", {}, h("a", { href: "#/events" }, "← Events")), h("h1", { class: "mono" }, orgId), head,
      h("h2", {}, "Clerk Billing plan"), plan, h("h2", {}, "Pending invitations"), invs, h("h2", {}, "Events, newest first"), evs);
    (async () => {
      try {
        const o = await api("GET", "/v1/organizations/" + encodeURIComponent(orgId), { includeDeleted: true });
        const f = (label, v) => [h("dt", {}, label), h("dd", {}, v === null || v === undefined || v === "" ? h("span", { class: "muted" }, "—") : v)];
        put(clear(head), h("div", { class: "panel" }, h("dl", { class: "fields", id: "org-fields" },
          f("Status", o.deletedAt ? badge("deleted") : "active"), f("Name", o.name), f("Slug", o.slug ? h("span", { class: "mono" }, o.slug) : null),
          f("Members", o.membersCount === null ? null : num(o.membersCount)),
          f("Created by", o.createdBy ? h("a", { class: "mono", href: "#/users/" + encodeURIComponent(o.createdBy) }, o.createdBy) : null),
          f("Created here", when(o.createdAt)), f("Updated here", when(o.updatedAt)), f("Deleted", o.deletedAt ? when(o.deletedAt) : null),
          f("Public metadata", h("pre", { class: "payload" }, JSON.stringify(o.metadata, null, 2))))));
      } catch (e) {
        put(clear(head), h("p", { class: e.status === 404 ? "muted" : "error" },
          e.status === 404 ? "This organization is not stored here (events may still name it)." : e.message));
        return;
      }
      try {
        put(clear(plan), planFields(await api("GET", "/v1/organizations/" + encodeURIComponent(orgId) + "/billing")));
      } catch (e) {
        put(clear(plan), h("p", { class: "error" }, e.message));
      }
    })();
    // The first page of its pending invitations (those past their expiry
    // read as expired, and are not listed).
    (async () => {
      try {
        const page = await api("GET", "/v1/organizations/" + encodeURIComponent(orgId) + "/invitations", { status: "pending", limit: 50 });
        put(clear(invs), table(["Email", "Role", "Sent", "Expires", "Invitation"], page.data.map((i) =>
          h("tr", {}, h("td", {}, i.emailAddress || ""), h("td", { class: "mono" }, i.role || ""),
            h("td", {}, i.sourceCreatedAt ? when(i.sourceCreatedAt) : "—"), h("td", {}, i.expiresAt ? when(i.expiresAt) : "—"),
            h("td", { class: "mono" }, i.invitationId))), "No pending invitation."),
          page.nextCursor ? h("p", { class: "muted" }, "… and more: GET /v1/organizations/{orgId}/invitations?status=pending lists them all.") : null);
      } catch (e) {
        put(clear(invs), h("p", { class: "error" }, e.message));
      }
    })();
    const p = pager(async (cursor) => {
      const page = await api("GET", "/v1/events", { objectId: orgId, limit: 20, cursor });
      put(clear(evs), page.data.length ? page.data.map(eventRow) : h("p", { class: "muted" }, "No events of this organization."));
      return page.nextCursor;
    });
    put(root, p.el);
    p.reset();
  }

  function userFields(u) {
    const f = (label, v) => [h("dt", {}, label), h("dd", {}, v === null || v === undefined || v === "" ? h("span", { class: "muted" }, "—") : v)];
    return h("div", { class: "panel" }, h("dl", { class: "fields", id: "user-fields" },
      f("Status", u.deletedAt ? badge("deleted") : "active"),
      f("Email", u.email), f("Display name", u.displayName), f("First name", u.firstName), f("Last name", u.lastName),
      f("Username", u.username), f("Phone", u.phoneNumber), f("External id", u.externalId),
      f("Image URL", u.imageUrl ? h("span", { class: "mono" }, u.imageUrl) : null),
      f("Banned / locked", (u.banned ? "banned" : "not banned") + " · " + (u.locked ? "locked" : "not locked")),
      f("Last sign-in", when(u.lastSignInAt)), f("Last active", when(u.lastActiveAt)), f("Created here", when(u.createdAt)), f("Updated here", when(u.updatedAt)),
      f("Deleted", u.deletedAt ? when(u.deletedAt) : null),
      f("Public metadata", h("pre", { class: "payload" }, JSON.stringify(u.metadata, null, 2)))));
  }

  // planFields shows a payer's plan as GET …/billing answers it.
  function planFields(b) {
    if (!b.plan) return h("p", { class: "muted" }, "No Clerk Billing plan.");
    const p = b.plan;
    const f = (label, v) => [h("dt", {}, label), h("dd", {}, v === null || v === undefined || v === "" ? h("span", { class: "muted" }, "—") : v)];
    const name = (bp) => bp ? [h("span", { class: "mono" }, bp.slug), bp.name ? " · " + bp.name : ""] : null;
    return h("div", { class: "panel" }, h("dl", { class: "fields" },
      f("Plan", name(p.plan)), f("Status", badge(p.status)),
      f("Period end", p.periodEnd ? when(p.periodEnd) : null),
      f("Canceled at period end", p.cancelAtPeriodEnd ? "yes" : "no"),
      f("Free trial", p.freeTrial ? "yes" : "no"),
      f("Seats", p.seats === null ? "unlimited" : String(p.seats)),
      f("Upcoming", p.upcoming ? name(p.upcoming.plan) : null),
      f("Items", String(b.items.length)), f("Changed here", when(p.updatedAt))));
  }

  function userActions(u, userId, reload) {
    const out = h("p", { id: "user-action-result", role: "status" });
    const sync = h("button", { type: "button", id: "user-sync", onclick: async () => {
      if (!(await confirmDialog("Sync from Clerk", "Read " + userId + " from Clerk's API now and apply it as a webhook would? A newer state stored here is kept; a deleted user stays deleted.", "Sync now"))) return;
      try {
        await api("POST", "/v1/users/" + encodeURIComponent(userId) + "/sync", { includeDeleted: true });
        out.textContent = "Synced from Clerk.";
        reload();
      } catch (e) { out.textContent = e.status === 501 ? "Fetching from Clerk is not configured: set CLERK_SECRET_KEY on the server." : e.message; out.className = "error"; }
    } }, "Sync from Clerk now");
    const erase = u && u.deletedAt ? h("button", { type: "button", class: "danger", id: "user-erase", onclick: async () => {
      if (!(await confirmDialog("Erase " + userId, "Erase the bodies and payloads of this deleted user's events now? This cannot be undone.", "Erase", true))) return;
      try {
        const r = await api("POST", "/v1/users/" + encodeURIComponent(userId) + "/erase");
        out.textContent = "Erased " + r.erasedEvents + " events; " + r.pendingEvents + " still to process.";
      } catch (e) { out.textContent = e.message; out.className = "error"; }
    } }, "Erase event data") : null;
    return h("div", {}, h("div", { class: "actions" }, sync, erase), out);
  }

  // eventRow is one event of a list, which opens to its payload.
  function eventRow(ev) {
    const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const line = (e) => [when(e.receivedAt), h("span", { class: "mono" }, e.type), badge(e.status), badge(e.outcome),
      h("span", { class: "mono muted" }, e.eventId || e.id), e.error ? clip(e.error, 60, "error") : null];
    const summary = h("summary", {}, line(ev));
    let loaded = false;
    const fill = async (note) => {
      try {
        const full = await api("GET", "/v1/events/" + encodeURIComponent(ev.id));
        put(clear(summary), line(full));
        put(clear(body), eventDetail(full, fill, note));
      } catch (e) { put(clear(body), h("p", { class: "error" }, e.message)); loaded = false; }
    };
    const det = h("details", { class: "event", "data-event": ev.eventId || ev.id, ontoggle: () => {
      if (!det.open || loaded) return;
      loaded = true;
      fill();
    } }, summary, body);
    return det;
  }

  // ---- events ------------------------------------------------------------------------------

  function events(root) {
    document.title = "Events · usersync";
    const f = {};
    const sel = (id, label, opts) => { f[id] = h("select", { id: "ev-" + id }, opts.map((o) => h("option", { value: o }, o || "any"))); return h("div", {}, h("label", { for: "ev-" + id }, label), f[id]); };
    const inp = (id, label, type, ph) => { f[id] = h("input", { id: "ev-" + id, type, placeholder: ph || "" }); return h("div", {}, h("label", { for: "ev-" + id }, label), f[id]); };
    const look = h("input", { id: "ev-lookup", type: "search", placeholder: "msg_…", size: 34, autocomplete: "off" });
    const lookErr = h("span", { class: "error", role: "alert" });
    const lookup = h("form", { class: "filters", onsubmit: async (e) => {
      e.preventDefault();
      lookErr.textContent = "";
      const id = look.value.trim();
      if (!id) return;
      try {
        const ev = await api("GET", "/v1/events/" + encodeURIComponent(id));
        location.hash = "#/events/" + encodeURIComponent(ev.eventId || ev.id);
      } catch (err) { lookErr.textContent = err.status === 404 ? "No event has that svix-id or id." : err.message; }
    } }, h("div", {}, h("label", { for: "ev-lookup" }, "Find by svix-id (the message id in Clerk's dashboard) or event id"), look),
    h("button", { type: "submit" }, "Open"), lookErr);

    const filters = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); apply(); } },
      sel("status", "Status", ["", "stored", "processed", "failed", "discarded"]),
      sel("kind", "Kind", ["", "user", "organization", "membership", "invitation", "subscription", "subscription_item", "payment_attempt"]),
      sel("eventType", "Type", ["", "created", "updated", "deleted"]),
      inp("userId", "User id", "text", "user_…"),
      inp("objectId", "Organization or membership id", "text", "org_… or orgmem_…"),
      inp("since", "Received from", "datetime-local"), inp("until", "Received before", "datetime-local"),
      h("button", { type: "submit", id: "ev-apply" }, "Show"),
      h("button", { type: "button", class: "quiet", id: "ev-replay-filter", onclick: () => bulkReplay(filterParams(), "the failed events of this filter", refresh) }, "Replay failed of this filter…"));
    const list = h("div", { id: "event-list" });
    const groups = h("div", { id: "failure-groups" });
    let params = {};
    const filterParams = () => {
      const p = {};
      for (const k of ["kind", "eventType", "userId", "objectId"]) if (f[k].value.trim()) p[k] = f[k].value.trim();
      if (f.since.value) p.since = toISO(f.since.value);
      if (f.until.value) p.until = toISO(f.until.value);
      return p;
    };
    const p = pager(async (cursor) => {
      const page = await api("GET", "/v1/events", Object.assign({ limit: 50, cursor }, params));
      put(clear(list), table(["Received", "Event (svix-id)", "Type", "User", "Status", "Outcome", "Attempts#", "Error"], page.data.map((ev) =>
        h("tr", { "data-type": ev.type },
          h("td", {}, when(ev.receivedAt)),
          h("td", {}, h("a", { class: "mono", href: "#/events/" + encodeURIComponent(ev.eventId || ev.id) }, ev.eventId || ev.id)),
          // Clerk's type, and the organization or membership it changes: a
          // link to that object's events.
          h("td", { class: "mono" }, ev.type, ev.objectId ? [h("br"), h("a", { class: "object muted", href: "#/events?objectId=" + encodeURIComponent(ev.objectId) }, ev.objectId)] : null),
          h("td", {}, ev.userId ? h("a", { class: "mono", href: "#/users/" + encodeURIComponent(ev.userId) }, ev.userId) : ""),
          h("td", {}, badge(ev.status)), h("td", {}, badge(ev.outcome)), h("td", { class: "num" }, ev.attempts),
          h("td", {}, ev.error ? h("span", { class: "error" }, clip(ev.error, 50)) : ""))), "No event matches."));
      return page.nextCursor;
    });
    function apply() {
      params = filterParams();
      if (f.status.value) params.status = f.status.value;
      const hash = new URLSearchParams(Object.assign({}, params));
      history.replaceState(null, "", "#/events" + (hash.toString() ? "?" + hash : ""));
      return p.reset();
    }
    function refresh() { loadGroups(groups); return p.reset(); }
    // Filters from the address: #/events?status=failed&userId=…
    const fromHash = new URLSearchParams((location.hash.split("?")[1]) || "");
    for (const k of ["status", "kind", "eventType", "userId", "objectId"]) if (fromHash.get(k)) f[k].value = fromHash.get(k);
    for (const k of ["since", "until"]) if (fromHash.get(k)) f[k].value = toLocalInput(fromHash.get(k));

    put(root, h("h1", {}, "Events"), lookup, h("h2", {}, "Failures by reason"), groups, h("h2", {}, "Event log"), filters, list, p.el);
    loadGroups(groups, refresh);
    apply();
  }

  async function loadGroups(el, refresh) {
    let g;
    try { g = await api("GET", "/v1/events/failures"); } catch (e) { put(clear(el), h("p", { class: "error" }, e.message)); return; }
    put(clear(el), table(["Reason", "Failed#", "Given up#", "Latest", "Example", ""], g.groups.map((gr) =>
      h("tr", {},
        h("td", { class: "mono" }, gr.reason),
        h("td", { class: "num" }, num(gr.count)), h("td", { class: "num" }, num(gr.gaveUp)),
        h("td", {}, when(gr.latestAt)),
        h("td", {}, h("a", { class: "mono", href: "#/events/" + encodeURIComponent(gr.latestEventId) }, gr.latestEventId), h("br"), h("span", { class: "muted" }, clip(gr.latestError, 60))),
        h("td", {}, h("button", { type: "button", class: "quiet", "data-reason": gr.reason, onclick: () => bulkReplay({ reason: gr.reason }, "the failed events of reason “" + gr.reason + "”", refresh || (() => loadGroups(el))) }, "Replay group…")))),
    "No failed events."), g.complete ? null : h("p", { class: "muted" }, "Counted from the newest " + num(g.scanned) + " failed events; there are more."));
  }

  // bulkReplay counts the events a replay would take, asks, then replays
  // them (at most 500 a call; again for the next ones).
  async function bulkReplay(filter, what, done) {
    let count;
    try {
      count = await api("POST", "/v1/events/replay", Object.assign({ status: "failed", limit: 500, dryRun: true }, filter));
    } catch (e) { fail(e); return; }
    if (count.matched === 0) { say("No failed event matches: nothing to replay."); return; }
    const n = count.matched + (count.more ? " (of more: 500 at most per replay)" : "");
    if (!(await confirmDialog("Replay " + count.matched + " events", "Replay " + n + " of " + what + "? Each is processed again as a delivery would be, in Clerk's order.", "Replay " + count.matched))) return;
    try {
      const r = await api("POST", "/v1/events/replay", Object.assign({ status: "failed", limit: 500 }, filter));
      say("Replayed " + r.replayed + ": " + r.processed + " processed, " + r.failed + " failed again" + (r.skipped ? ", " + r.skipped + " skipped" : "") +
        (r.incomplete ? "; stopped early, replay again for the rest" : r.more ? "; more remain" : "") + ".", r.failed > 0);
    } catch (e) { fail(e); }
    if (done) done();
  }

  function eventPage(root, idOnly) {
    document.title = idOnly + " · usersync";
    const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    put(root, h("p", {}, h("a", { href: "#/events" }, "← Events")), h("h1", { class: "mono" }, idOnly), body);
    const load = async (note) => {
      try {
        const ev = await api("GET", "/v1/events/" + encodeURIComponent(idOnly));
        put(clear(body), eventDetail(ev, load, note));
      } catch (e) { put(clear(body), h("p", { class: "error" }, e.status === 404 ? "No event has that svix-id or id." : e.message)); }
    };
    load();
  }

  // eventDetail shows an event: its history, its payload, and a replay;
  // note is the result of the replay that led to it being shown again.
  function eventDetail(ev, reload, note) {
    const f = (label, v) => [h("dt", {}, label), h("dd", {}, v === null || v === undefined || v === "" ? h("span", { class: "muted" }, "—") : v)];
    const out = h("p", { role: "status", class: "replay-result" + (note ? " " + note.tone : "") }, note ? note.text : "");
    const canReplay = ev.status !== "processed" && ev.status !== "discarded" && !ev.erased;
    const replay = h("button", { type: "button", class: "replay", disabled: !canReplay, onclick: async () => {
      if (!(await confirmDialog("Replay " + (ev.eventId || ev.id), "Process this " + ev.status + " event again, as a new delivery of it would be?", "Replay"))) return;
      try {
        const r = await api("POST", "/v1/events/" + encodeURIComponent(ev.id) + "/replay");
        const n = { tone: r.status === "processed" ? "ok" : "error",
          text: "Replayed: " + r.status + (r.outcome ? " (" + r.outcome + ")" : "") + (r.error ? ": " + r.error : "") };
        if (reload) reload(n);
        else { out.className = "replay-result " + n.tone; out.textContent = n.text; }
      } catch (e) { out.className = "replay-result error"; out.textContent = e.message; }
    } }, "Replay");
    // Only a failed event can be discarded: given up on, with a reason.
    const discard = ev.status === "failed" ? h("button", { type: "button", class: "danger discard", onclick: async () => {
      const reason = await discardDialog("Discard " + (ev.eventId || ev.id));
      if (reason === null) return;
      try {
        await api("POST", "/v1/events/" + encodeURIComponent(ev.id) + "/discard", {}, undefined, { reason });
        const n = { tone: "ok", text: "Discarded: it is kept, never applied." };
        if (reload) reload(n);
        else { out.className = "replay-result ok"; out.textContent = n.text; }
      } catch (e) { out.className = "replay-result error"; out.textContent = e.message; }
    } }, "Discard…") : null;
    return h("div", { class: "split event-detail" },
      h("div", {},
        h("h3", {}, "History"),
        h("dl", { class: "fields" },
          f("Status", badge(ev.status)), f("Outcome", badge(ev.outcome)), f("Attempts", String(ev.attempts)),
          f("Last error", ev.error ? h("span", { class: "error" }, ev.error) : null),
          f("Next retry", ev.retryAt ? when(ev.retryAt) : ev.status === "failed" ? "none: given up, waits for a replay" : null),
          f("Received", when(ev.receivedAt)), f("Processed", when(ev.processedAt)),
          f("Clerk time", when(ev.sourceTimestamp)),
          f("svix-id", ev.eventId ? h("span", { class: "mono" }, ev.eventId) : null), f("Stored id", h("span", { class: "mono" }, ev.id)),
          f("Type", h("span", { class: "mono" }, ev.type)),
          f("User", ev.userId ? h("a", { class: "mono", href: "#/users/" + encodeURIComponent(ev.userId) }, ev.userId) : null),
          ev.objectId && ev.objectId.startsWith("org_")
            ? f("Organization", h("a", { class: "mono", href: "#/organizations/" + encodeURIComponent(ev.objectId) }, ev.objectId)) : null,
          f("Signature", ev.signatureValid === null ? "not checked (not signed: backfill or reconcile)" : ev.signatureValid ? "valid" : "invalid"),
          f("Erased", ev.erased ? when(ev.erasedAt) : null),
          ev.status === "discarded" ? [f("Discarded", when(ev.discardedAt)), f("Why", ev.discardReason), f("By", h("span", { class: "mono" }, ev.discardedBy))] : null),
        h("div", { class: "actions" }, replay, discard), out),
      h("div", {}, h("h3", {}, "Payload"),
        ev.erased ? h("p", { class: "muted" }, "Erased: the user is deleted and the body is gone.")
          : h("pre", { class: "payload" }, JSON.stringify(ev.payload, null, 2))));
  }

  // ---- reconcile ---------------------------------------------------------------------------

  function reconcile(root) {
    document.title = "Reconcile · usersync";
    const runs = h("div", { id: "runs" }, h("p", { class: "muted" }, "Loading…"));
    const dry = h("div", { id: "dry-run" });
    const start = h("button", { type: "button", id: "dry-start", onclick: async () => {
      try {
        await api("POST", "/v1/reconcile/dry-run");
        poll();
      } catch (e) { dryMessage(e); }
    } }, "Start a dry run");
    put(root, h("h1", {}, "Reconcile"),
      h("p", { class: "muted" }, "Reconcile reads Clerk's whole lists of users, organizations and memberships, applies every state as a webhook would and deletes the objects Clerk no longer has. A dry run reads the lists and changes nothing."),
      h("h2", {}, "Dry run"), h("div", { class: "actions" }, start), dry,
      h("h2", {}, "Last runs"), runs);
    function dryMessage(e) {
      put(clear(dry), h("p", { class: e.status === 501 ? "muted" : "error" },
        e.status === 501 ? "Not available: set CLERK_SECRET_KEY on the server to read from Clerk." : e.message));
    }
    let timer = null;
    async function poll() {
      let st;
      try { st = await api("GET", "/v1/reconcile/dry-run"); } catch (e) { start.disabled = e.status === 501; dryMessage(e); return; }
      renderDry(dry, st);
      if (st.state === "running" && !timer) {
        timer = setInterval(poll, 2000);
        timers.push(timer);
      } else if (st.state !== "running" && timer) { clearInterval(timer); timer = null; }
    }
    poll();
    (async () => {
      try {
        const r = await api("GET", "/v1/reconcile/runs", { limit: 50 });
        put(clear(runs), table(["Started", "Run", "Result", "Objects", "Clerk#", "Local#", "Applied#", "Stale#", "Unchanged#", "Deleted#", "Failed#", "Took#"],
          r.data.map(runRows),
        ["No run recorded yet: runs of ", h("code", {}, "usersync reconcile"), ", ", h("code", {}, "usersync backfill"),
          " and of ", h("code", {}, "USERSYNC_RECONCILE_INTERVAL"), " appear here."]));
      } catch (e) { put(clear(runs), h("p", { class: "error" }, e.message)); }
    })();
  }

  // runRows are the rows of one run: one per kind of object, the run's
  // own cells spanning them.
  function runRows(x) {
    const span = { rowspan: OBJECTS.length };
    return OBJECTS.map((o, i) => h("tr", { class: i === 0 ? "run-first" : "", "data-run": x.id, "data-object": o },
      i === 0 ? [h("td", span, when(x.startedAt)), h("td", span, x.kind + " (" + x.trigger + ")"),
        h("td", span, x.success ? badge("success") : h("span", {}, badge("failed"), " ", clip(x.error || (x.refused ? "refused" : ""), 40)))] : null,
      h("th", { scope: "row" }, objectName(o)),
      kindCells(x[o], "not read: not part of this run, or turned off in the Clerk instance"),
      i === 0 ? h("td", Object.assign({ class: "num" }, span), x.durationSeconds.toFixed(1) + " s") : null));
  }

  // kindCells are the counts of one kind (c), or a cell that says it was
  // not read.
  function kindCells(c, why) {
    if (!c) return h("td", { colspan: 7, class: "muted not-read", title: why }, "not read");
    return [num(c.clerk), c.local === null ? "—" : num(c.local), num(c.applied), num(c.stale), num(c.unchanged)].map((v) => h("td", { class: "num" }, v)).concat(
      h("td", { class: "num" }, c.refused ? h("span", { class: "warn", title: "more absent from Clerk than allowed: none deleted" }, "refused: " + num(c.toDelete)) : num(c.deleted)),
      h("td", { class: "num" }, num(c.failed)));
  }

  function renderDry(el, st) {
    clear(el);
    if (st.state === "none") { put(el, h("p", { class: "muted" }, "No dry run since this instance started.")); return; }
    put(el, h("p", {}, badge(st.state), " started ", when(st.startedAt), st.finishedAt ? [" · finished ", when(st.finishedAt)] : "",
      " · " + num(st.listed) + " objects read from Clerk"));
    if (st.error) put(el, h("p", { class: "error" }, st.error));
    const r = st.report;
    if (r) {
      put(el, h("div", { id: "dry-kinds" }, table(["Objects", "Clerk#", "Local#", "Would create or update#", "Stale#", "Unchanged#", "Would delete#", "Could not apply#", "Whole list read", "Deletions"],
        OBJECTS.map((o) => {
          const c = r[o];
          return h("tr", { "data-object": o }, h("th", { scope: "row" }, objectName(o)),
            kindCells(c, "not read: " + (o === "subscriptionItems" ? "Billing is" : "organizations are") + " turned off in the Clerk instance"),
            c ? [h("td", {}, c.complete ? "yes" : h("span", { class: "warn" }, "no")),
              h("td", {}, c.refused ? h("span", { class: "warn" }, "refused: " + num(c.toDelete) + " absent, over the limit") : c.deletesSkipped || "")] : h("td", { colspan: 2 }));
        }))));
    }
    const label = { would_create: "would create", would_update: "would update", would_delete: "would delete", failed: "cannot apply", unchecked: "not checked" };
    put(el, table(["Kind", "Object", "Change", "Why"], st.changes.map((c) =>
      h("tr", {}, h("td", {}, c.kind),
        h("td", {}, !c.id ? "(no id)" : c.kind === "user" ? h("a", { class: "mono", href: "#/users/" + encodeURIComponent(c.id) }, c.id) : h("span", { class: "mono" }, c.id)),
        h("td", {}, label[c.action] || c.action), h("td", {}, c.error ? h("span", { class: "error" }, c.error) : ""))),
    st.state === "running" ? "Nothing yet." : "Nothing would change."),
    st.changesDropped ? h("p", { class: "muted" }, "… and " + num(st.changesDropped) + " more.") : null);
  }

  // ---- endpoints (outbound webhooks) ---------------------------------------------------------

  // Secrets are shown only in the answer that carries one (a creation, a
  // rotation), in secretBox; no list or page of an endpoint has them.
  const OUT_TYPES = ["user", "organization", "organizationMembership", "organizationInvitation", "subscription", "subscriptionItem", "paymentAttempt", "plan"];

  // host is the host of an endpoint's URL: the rest may carry a token.
  function host(url) {
    try { return new URL(url).host; } catch (e) { return url; }
  }
  // plainHTTPMark marks an endpoint kept on plain http (plainHttpKept).
  function plainHTTPMark() {
    return h("span", { class: "badge plain-http", title: "on plain HTTP, not TLS: kept as stored, a new one would be refused on a public address (USERSYNC_ENDPOINTS_ALLOW_HTTP)" }, "plain http");
  }
  function typesText(types) { return types && types.length ? types.join(", ") : "every type"; }
  function stateCell(ep) {
    if (ep.enabled) return badge("enabled");
    return h("span", {}, badge("disabled"), ep.disabledReason ? [" ", h("span", { class: "error" }, ep.disabledReason)] : " by an admin");
  }
  function notOutbound(el, e) {
    put(clear(el), h("p", { class: e.status === 501 ? "muted" : "error" },
      e.status === 501 ? "Outbound webhooks are not configured on this server." : e.message));
  }

  // secretBox shows a secret this once, to copy.
  function secretBox(secret, what) {
    const input = h("input", { id: "secret-value", type: "text", readOnly: true, value: secret, size: 48, spellcheck: "false", "aria-label": "Signing secret" });
    const done = h("span", { role: "status", class: "muted" });
    return h("div", { class: "panel secret-box", id: "secret-box" },
      h("p", { class: "warn" }, "The signing secret of " + what + ". Copy it now: it is not shown again. Give it to the app only (its webhook verifier); anyone who has it can sign messages the app would trust."),
      h("div", { class: "actions" }, input,
        h("button", { type: "button", id: "secret-copy", onclick: async () => {
          input.select();
          try { await navigator.clipboard.writeText(secret); done.textContent = "Copied."; } catch (e) { done.textContent = "Select it and copy it (Ctrl+C)."; }
        } }, "Copy"), done),
      h("button", { type: "button", class: "quiet", onclick: (ev) => { input.value = ""; ev.target.closest(".secret-box").remove(); } }, "I have copied it: hide it"));
  }

  // failureReason groups a failed attempt: its status code, or its error
  // without the details that differ from one attempt to the next.
  function failureReason(a) {
    if (a.status) return "HTTP " + a.status;
    return (a.error || "no answer").replace(/\d+(\.\d+)*/g, "N").slice(0, 80);
  }

  function endpoints(root) {
    document.title = "Endpoints · usersync";
    const list = h("div", { id: "endpoint-list" }, h("p", { class: "muted" }, "Loading…"));
    const groups = h("div", { id: "endpoint-failures" });
    const created = h("div", { id: "endpoint-created" });
    const f = {
      url: h("input", { id: "ep-url", type: "url", required: true, size: 50, maxLength: 2048, placeholder: "the app's webhook URL (https)", autocomplete: "off" }),
      types: h("input", { id: "ep-types", type: "text", size: 40, maxLength: 2000, placeholder: "every type", list: "ep-type-list", autocomplete: "off" }),
      desc: h("input", { id: "ep-desc", type: "text", size: 40, maxLength: 500, autocomplete: "off" }),
      enabled: h("input", { id: "ep-enabled", type: "checkbox", checked: true }),
    };
    const formErr = h("p", { class: "error", role: "alert", id: "ep-form-error" });
    const typeList = h("datalist", { id: "ep-type-list" }, ["*"].concat(OUT_TYPES.map((t) => t + ".*")).map((t) => h("option", { value: t })));
    const form = h("form", { class: "filters", id: "ep-form", onsubmit: async (ev) => {
      ev.preventDefault();
      formErr.textContent = "";
      const types = f.types.value.split(/[\s,]+/).filter(Boolean);
      try {
        const ep = await api("POST", "/v1/endpoints", {}, undefined,
          { url: f.url.value.trim(), eventTypes: types, description: f.desc.value.trim(), enabled: f.enabled.checked });
        form.reset();
        f.enabled.checked = true;
        put(clear(created), h("p", { class: "ok" }, "Registered ", h("a", { class: "mono", href: "#/endpoints/" + encodeURIComponent(ep.id) }, ep.id), " for " + host(ep.url) + "."),
          secretBox(ep.secret, ep.id));
        load();
      } catch (e) { formErr.textContent = e.status === 501 ? "Outbound webhooks are not configured on this server." : e.message; }
    } },
    h("div", {}, h("label", { for: "ep-url" }, "URL"), f.url),
    h("div", {}, h("label", { for: "ep-types" }, "Event types (comma-separated; empty: every type)"), f.types, typeList),
    h("div", {}, h("label", { for: "ep-desc" }, "Description"), f.desc),
    h("label", { class: "inline" }, f.enabled, "Enabled"),
    h("button", { type: "submit", id: "ep-create" }, "Register"));

    async function load() {
      let r;
      try { r = await api("GET", "/v1/endpoints"); } catch (e) { notOutbound(list, e); clear(groups); return; }
      put(clear(list), table(["Endpoint", "Host", "Event types", "State", "Source", "Backlog#", "Oldest pending", "Failing since"], r.endpoints.map((ep) =>
        h("tr", { "data-endpoint": ep.id },
          h("td", {}, h("a", { class: "mono", href: "#/endpoints/" + encodeURIComponent(ep.id) }, ep.id), ep.description ? [h("br"), clip(ep.description, 40, "muted")] : null),
          h("td", { class: "mono" }, host(ep.url), ep.plainHttpKept ? [" ", plainHTTPMark()] : null),
          h("td", {}, clip(typesText(ep.eventTypes), 40, "mono")),
          h("td", { class: "ep-state" }, stateCell(ep)),
          h("td", {}, ep.fromConfig ? "configuration" : "API"),
          h("td", { class: "num ep-backlog" }, num(ep.backlog)),
          h("td", {}, ep.oldestPendingAt ? when(ep.oldestPendingAt, { ago: true }) : h("span", { class: "muted" }, "—")),
          h("td", {}, ep.failingSince ? h("span", { class: "error" }, when(ep.failingSince, { ago: true })) : h("span", { class: "muted" }, "—")))),
      "No endpoint yet: register one below, or list them in USERSYNC_ENDPOINTS_FILE."));
      loadEndpointFailures(groups, r.endpoints);
    }
    put(root, h("h1", {}, "Endpoints"),
      h("p", { class: "muted" }, "The app's endpoints that usersync tells of every change that applies, signed as Standard Webhooks."),
      list, h("h2", {}, "Failures by endpoint"), groups, h("h2", {}, "Register an endpoint"), form, formErr, created);
    load();
    timers.push(setInterval(() => { if (!document.hidden) load(); }, 30000));
  }

  // failureScan is how many of an endpoint's latest failed attempts the
  // summary reads.
  const failureScan = 200;

  async function loadEndpointFailures(el, eps) {
    const rows = [];
    for (const ep of eps) {
      let r;
      try { r = await api("GET", "/v1/endpoints/" + encodeURIComponent(ep.id) + "/attempts", { failed: true, limit: failureScan }); } catch (e) { continue; }
      const by = new Map();
      for (const a of r.attempts) {
        const k = failureReason(a);
        const g = by.get(k) || { count: 0, latest: a };
        g.count++;
        by.set(k, g);
      }
      const sorted = [...by.entries()].sort((x, y) => y[1].count - x[1].count);
      sorted.forEach(([reason, g], i) => rows.push(h("tr", { "data-endpoint": ep.id, "data-reason": reason },
        i === 0 ? h("td", { rowspan: sorted.length }, h("a", { class: "mono", href: "#/endpoints/" + encodeURIComponent(ep.id) }, ep.id), h("br"),
          h("span", { class: "muted mono" }, host(ep.url)), r.nextCursor ? [h("br"), h("span", { class: "muted" }, "of its latest " + failureScan + " failures")] : null) : null,
        h("td", { class: "mono" }, reason), h("td", { class: "num" }, num(g.count)), h("td", {}, when(g.latest.at)),
        h("td", {}, h("span", { class: "mono" }, g.latest.type), " ", clip(g.latest.error, 50, "error")))));
    }
    put(clear(el), table(["Endpoint", "Failure", "Attempts#", "Latest", "Latest attempt"], rows, "No failed attempt."));
  }

  // waitsFor says when a pending delivery goes, and why it waits: its
  // endpoint is disabled, a failure's retry, a payer's plan not settled
  // (between a plan change's two events: it goes once the change's second
  // event arrives, or once USERSYNC_BILLING_GRACE has passed), or due.
  function waitsFor(d, ep) {
    const later = d.nextAttemptAt && new Date(d.nextAttemptAt) > new Date();
    if (ep && !ep.enabled) return h("span", { class: "warn" }, "waits: the endpoint is disabled");
    if (d.attempts > 0) return ["attempt ", String(d.attempts + 1), " of 8, ", when(d.nextAttemptAt)];
    if (d.kind === "plan" && later) {
      return h("span", { title: "Between a plan change's two events the plan reads pending, and no plan.changed is sent: it goes with the new plan, or as ended once USERSYNC_BILLING_GRACE has passed." },
        "waits for the plan to settle: at the latest ", when(d.nextAttemptAt));
    }
    return later ? ["next ", when(d.nextAttemptAt)] : "due: in the next round";
  }

  function endpointPage(root, id) {
    document.title = id + " · usersync";
    let current = null; // the endpoint, as last read
    const head = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const out = h("div", { id: "ep-result", role: "status" });
    const attempts = h("div", { id: "ep-attempts" });
    const deliveries = h("div", { id: "ep-deliveries" });
    const failedOnly = h("input", { id: "ep-failed-only", type: "checkbox", onchange: () => ap.reset() });
    const status = h("select", { id: "ep-status", onchange: () => dp.reset() },
      ["", "pending", "delivered", "failed", "dropped"].map((s) => h("option", { value: s }, s || "any")));
    const note = (text, tone) => { put(clear(out), h("p", { class: tone || "" }, text)); };
    const ap = pager(async (cursor) => {
      const r = await api("GET", "/v1/endpoints/" + encodeURIComponent(id) + "/attempts", { failed: failedOnly.checked, limit: 25, cursor });
      put(clear(attempts), table(["At", "Type", "Object", "Webhook id", "Result", "Status#", "Latency#", "Error"], r.attempts.map((a) =>
        h("tr", { "data-attempt": a.id, "data-webhook": a.webhookId },
          h("td", {}, when(a.at)), h("td", { class: "mono" }, a.type), h("td", { class: "mono" }, a.objectId),
          h("td", { class: "mono" }, clip(a.webhookId, 30)),
          h("td", {}, badge(a.delivered ? "delivered" : "failed")),
          h("td", { class: "num attempt-status" }, a.status ? String(a.status) : "—"),
          h("td", { class: "num" }, num(a.latencyMs) + " ms"),
          h("td", {}, a.error ? clip(a.error, 50, "error") : ""))),
      failedOnly.checked ? "No failed attempt." : "No attempt yet."));
      return r.nextCursor;
    });
    const dp = pager(async (cursor) => {
      const r = await api("GET", "/v1/endpoints/" + encodeURIComponent(id) + "/deliveries", { status: status.value, limit: 25, cursor });
      put(clear(deliveries), table(["Object", "Type", "Origin", "Status", "Attempts#", "Last attempt", "Next attempt, or delivered", ""], r.deliveries.map((d) =>
        h("tr", { "data-kind": d.kind, "data-object": d.objectId },
          h("td", {}, h("span", { class: "muted" }, d.kind + " "), h("span", { class: "mono" }, d.objectId)),
          h("td", { class: "mono" }, d.type), h("td", {}, d.origin), h("td", {}, badge(d.status)),
          h("td", { class: "num delivery-attempts" }, d.status === "delivered" && !d.attempts
            ? h("span", { class: "muted", title: "no message was needed: the endpoint had this state" }, "none needed") : num(d.attempts)),
          h("td", { class: "last-attempt" }, when(d.lastAttemptAt), d.lastStatus ? " · HTTP " + d.lastStatus : "",
            d.lastError ? [h("br"), clip(d.lastError, 40, "error")] : null),
          h("td", { class: "delivery-next" }, d.status === "pending" ? waitsFor(d, current) : d.deliveredAt ? ["delivered ", when(d.deliveredAt)] : ""),
          h("td", {}, h("button", { type: "button", class: "quiet replay-delivery", onclick: async () => {
            try {
              const x = await api("POST", "/v1/endpoints/" + encodeURIComponent(id) + "/replay", {}, undefined, { kind: d.kind, objectId: d.objectId });
              note("Replay of " + d.objectId + ": " + x.requeued + " requeued; it is sent again whole, with its webhook-id.", "ok");
              dp.reset();
            } catch (e) { note(e.message, "error"); }
          } }, "Replay")))),
      status.value ? "No delivery is " + status.value + "." : "Nothing delivered yet."));
      return r.nextCursor;
    });

    const load = async () => {
      let ep;
      try { ep = await api("GET", "/v1/endpoints/" + encodeURIComponent(id)); } catch (e) {
        put(clear(head), h("p", { class: "error" }, e.status === 404 ? "No endpoint has this id." : e.message));
        return;
      }
      current = ep;
      put(clear(head), endpointFields(ep), endpointActions(ep, load, note, out));
    };
    const since = h("input", { id: "ep-since", type: "datetime-local" });
    const replaySince = h("form", { class: "filters", id: "ep-replay-since", onsubmit: async (ev) => {
      ev.preventDefault();
      if (!since.value) { note("Pick a time to replay from.", "error"); return; }
      const iso = toISO(since.value);
      if (!(await confirmDialog("Replay since " + dateFmt.format(new Date(iso)), "Send again, whole and with their webhook-ids, every delivery last attempted since then (at most 10,000)?", "Replay"))) return;
      try {
        const x = await api("POST", "/v1/endpoints/" + encodeURIComponent(id) + "/replay", {}, undefined, { since: new Date(iso).toISOString().replace(/\.\d{3}Z$/, "Z") });
        note("Replay since " + dateFmt.format(new Date(iso)) + ": " + x.requeued + " requeued.", "ok");
        dp.reset();
      } catch (e) { note(e.message, "error"); }
    } }, h("div", {}, h("label", { for: "ep-since" }, "Deliveries last attempted since"), since), h("button", { type: "submit", id: "ep-replay-since-go" }, "Replay since…"));

    put(root, h("p", {}, h("a", { href: "#/endpoints" }, "← Endpoints")), h("h1", { class: "mono" }, id), head, out,
      h("h2", {}, "Attempts, newest first"),
      h("div", { class: "actions" }, h("label", { class: "inline" }, failedOnly, "Failures only"),
        h("button", { type: "button", class: "quiet", id: "ep-attempts-refresh", onclick: () => { ap.reset(); dp.reset(); load(); } }, "Refresh")),
      attempts, ap.el,
      h("h2", {}, "Deliveries"),
      h("p", { class: "muted" }, "The last state of each object this endpoint was sent, or is to be sent. A replay sends the object's current state again, whole, with the same webhook-id."),
      h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); dp.reset(); } },
        h("div", {}, h("label", { for: "ep-status" }, "Status"), status)),
      deliveries, dp.el, replaySince);
    load();
    ap.reset();
    dp.reset();
  }

  function endpointFields(ep) {
    const f = (label, v) => [h("dt", {}, label), h("dd", {}, v === null || v === undefined || v === "" ? h("span", { class: "muted" }, "—") : v)];
    return h("div", { class: "panel" }, h("dl", { class: "fields", id: "ep-fields" },
      f("URL", h("span", {}, h("span", { class: "mono" }, ep.url), ep.plainHttpKept ? [" ", plainHTTPMark(), h("br"),
        h("span", { class: "warn" }, "Plain http: its messages (emails, plans) cross networks unencrypted. It works as it was stored " +
          (ep.fromConfig ? "in USERSYNC_ENDPOINTS_FILE" : "before usersync refused plain http to public addresses") +
          "; move it to HTTPS, or set USERSYNC_ENDPOINTS_ALLOW_HTTP=true.")] : null)),
      f("Description", ep.description),
      f("Event types", h("span", { class: "mono" }, typesText(ep.eventTypes))),
      f("State", stateCell(ep)),
      f("Source", ep.fromConfig ? "configuration (USERSYNC_ENDPOINTS_FILE): read-only here" : "API"),
      f("Backlog", num(ep.backlog) + (ep.oldestPendingAt ? " · oldest pending since " + ago(new Date(ep.oldestPendingAt)).replace(" ago", "") : "")),
      f("Failing since", ep.failingSince ? h("span", { class: "error" }, when(ep.failingSince)) : null),
      f("Previous secret signs until", ep.previousSecretUntil ? when(ep.previousSecretUntil) : null),
      f("Resync", resyncText(ep)),
      f("Created", when(ep.createdAt)), f("Changed", when(ep.updatedAt))));
  }

  // resyncText says how far the endpoint's resync is, and whether it
  // needs one.
  function resyncText(ep) {
    const r = ep.resync;
    const need = ep.needsResync ? h("span", { class: "error" }, "needed: it kept no more changes while disabled") : null;
    if (!r) return need;
    const state = r.doneAt ? "done " + when(r.doneAt) + ", " + num(r.queued) + " objects sent" :
      "under way: " + num(r.queued) + " objects queued, at " + r.kind + "s";
    return h("span", { id: "ep-resync" }, state, need ? " · " : null, need);
  }

  function endpointActions(ep, reload, note, out) {
    const path = "/v1/endpoints/" + encodeURIComponent(ep.id);
    const ro = ep.fromConfig;
    const test = h("button", { type: "button", id: "ep-test", onclick: async () => {
      test.disabled = true;
      note("Sending a test event…");
      try {
        const r = await api("POST", path + "/test");
        put(clear(out), h("div", { class: "panel", id: "ep-test-result" },
          h("p", { class: r.delivered ? "ok" : "error" }, (r.delivered ? "Delivered" : "Not delivered") +
            (r.status ? ": HTTP " + r.status : "") + " in " + num(r.latencyMs) + " ms" + (r.error ? " · " + r.error : "")),
          h("p", { class: "muted" }, "webhook-id ", h("span", { class: "mono" }, r.webhookId)),
          r.response ? h("pre", { class: "payload" }, r.response) : null));
      } catch (e) { note(e.message, "error"); }
      test.disabled = false;
    } }, "Send a test event");
    const toggle = h("button", { type: "button", id: "ep-toggle", class: ep.enabled ? "quiet" : "", disabled: ro, onclick: async () => {
      if (ep.enabled && !(await confirmDialog("Disable " + ep.id, "Stop sending to this endpoint? It keeps the newest state of each object it wants (up to 10,000 objects) and is sent them when it is enabled again.", "Disable"))) return;
      try {
        await api("PATCH", path, {}, undefined, { enabled: !ep.enabled });
        note(ep.enabled ? "Disabled." : "Enabled: what it kept while disabled is sent, and what failed is tried again" +
          (ep.needsResync ? "; it kept no more past 10,000 objects: resync it." : "."), "ok");
        reload();
      } catch (e) { note(e.message, "error"); }
    } }, ep.enabled ? "Disable" : "Enable");
    const rotate = h("button", { type: "button", id: "ep-rotate", class: "quiet", disabled: ro, onclick: async () => {
      if (!(await confirmDialog("Rotate the secret of " + ep.id, "Make a new signing secret? For 24 hours messages carry a signature with each, so that the app can change its secret meanwhile.", "Rotate"))) return;
      try {
        const r = await api("POST", path + "/rotate-secret", {}, undefined, { overlap: "24h" });
        await reload();
        put(clear(out), secretBox(r.secret, ep.id + " (the previous one signs too until " + dateFmt.format(new Date(r.previousSecretUntil)) + ")"));
      } catch (e) { note(e.message, "error"); }
    } }, "Rotate secret…");
    const resync = h("button", { type: "button", id: "ep-resync-start", class: "quiet", onclick: async () => {
      if (!(await confirmDialog("Resync " + ep.id, "Send this endpoint the current state of every object it wants (deleted ones left out), a page at a time?", "Resync"))) return;
      try {
        await api("POST", path + "/resync");
        note("Resync started: every object it wants is queued, a page at a time.", "ok");
        reload();
      } catch (e) { note(e.message, "error"); }
    } }, "Resync…");
    const del = h("button", { type: "button", id: "ep-delete", class: "danger", disabled: ro, onclick: async () => {
      if (!(await confirmDialog("Delete " + ep.id, "Delete this endpoint, its deliveries and attempts? Nothing more is sent to " + host(ep.url) + ". This cannot be undone.", "Delete", true))) return;
      try {
        await api("DELETE", path);
        history.pushState(null, "", "#/endpoints");
        route();
        say("Deleted " + ep.id + ".");
      } catch (e) { note(e.message, "error"); }
    } }, "Delete…");
    return h("div", { class: "actions" }, test, toggle, rotate, resync, del,
      ro ? h("span", { class: "muted" }, "From USERSYNC_ENDPOINTS_FILE: change it there.") : null);
  }

  // ---- start ------------------------------------------------------------------------------

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", signIn);
    $("signout").addEventListener("click", () => signOut("The key is forgotten."));
    window.addEventListener("hashchange", route);
    route();
  });
})();
