// The client against a real usersync, in order: a message of every type
// through the verifier, every read, errors, and the change feed walked
// from a saved cursor once the feed serves what was delivered (30 s).
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { before, test } from "node:test";

import { isDeleted, isNotFound, Usersync, UsersyncError, Verifier, type MessageType, type VerifiedMessage } from "../src/index.js";
import { admin, deliver, env, fixture, lastDelivery, noServer, steps, waitFor } from "./usersync.js";

// The objects testdata/outbound's deliveries make.
const userId = "user_29w83sxmDNGwOuEthce5gg56FcC";
const orgId = "org_2g7np7Hrk0SN6kj5EDMLDaKNL0S";
const payerId = "user_34D368EufHwugfYh4yyGNEheM0S";
const subscriptionId = "csub_2g7np7Hrk0SN6kj5EDMLDaKNL0S";
const paymentId = "cpa_Outbound";

/** Every type of usersync's outbound messages. */
const messageTypes: MessageType[] = [
  "user.created", "user.updated", "user.deleted",
  "organization.created", "organization.updated", "organization.deleted",
  "organizationMembership.created", "organizationMembership.updated", "organizationMembership.deleted",
  "organizationInvitation.created", "organizationInvitation.updated", "organizationInvitation.deleted",
  "subscription.created", "subscription.updated", "subscriptionItem.created", "subscriptionItem.updated",
  "paymentAttempt.created", "paymentAttempt.updated", "plan.changed", "usersync.test",
]; // prettier-ignore

/** The user user_2tsfeed<i>, with an email of its own. */
function feedUser(i: number): string {
  return fixture("user.created.json", (e) => {
    e.data.id = `user_2tsfeed${i}`;
    e.data.email_addresses[0].email_address = `tsfeed${i}@example.com`;
  });
}

const api = new Usersync(env.url, env.apiKey);
const adminApi = new Usersync(env.url, env.adminKey);

async function all<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const it of items) out.push(it);
  return out;
}

before(async () => {
  if (noServer) return;
  // Before any endpoint: no message of them is queued.
  for (let i = 0; i < 5; i++) await deliver(feedUser(i));
});

test("an endpoint verifies and parses a message of every type usersync sends", { skip: noServer }, async () => {
  const got: VerifiedMessage[] = [];
  const refused: string[] = [];
  let verifier: Verifier | undefined;
  const app: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        got.push(verifier!.verify(Buffer.concat(chunks).toString("utf8"), req.headers as Record<string, string>));
        res.writeHead(204).end();
      } catch (e) {
        refused.push(String(e));
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((r) => app.listen(0, "127.0.0.1", r));
  try {
    const { port } = app.address() as AddressInfo;
    const ep = await admin("POST", "/v1/endpoints", { url: `http://127.0.0.1:${port}/hooks/usersync` });
    assert.equal(ep.status, 201, JSON.stringify(ep.json));
    verifier = new Verifier(ep.json.secret);
    for (const s of steps()) {
      const before = got.length;
      await deliver(s.body);
      await waitFor(`${s.what}: ${s.types.join(", ")}`, () => s.types.every((t) => got.slice(before).some((m) => m.type === t)));
    }
    const test = await admin("POST", `/v1/endpoints/${ep.json.id}/test`);
    assert.equal(test.json.delivered, true, JSON.stringify(test.json));
    await waitFor("usersync.test", () => got.some((m) => m.type === "usersync.test"));
    assert.deepEqual(refused, []);
    for (const t of messageTypes) assert.ok(got.some((m) => m.type === t), `no ${t} message`);
    for (const m of got) {
      assert.match(m.id, /^msg_/);
      assert.ok(Array.isArray(m.changed) && typeof m.origin === "string" && !Number.isNaN(Date.parse(m.timestamp)), m.type);
      // The type narrows the data: each kind's id is where its schema says.
      switch (m.type) {
        case "user.created":
        case "user.updated":
        case "user.deleted":
          assert.equal(m.data.userId, userId);
          assert.equal(m.data.deletedAt !== null, m.type === "user.deleted");
          break;
        case "organization.created":
        case "organization.updated":
        case "organization.deleted":
          assert.equal(m.data.organizationId, orgId);
          break;
        case "organizationMembership.created":
        case "organizationMembership.updated":
        case "organizationMembership.deleted":
          assert.equal(m.data.organizationId, orgId);
          break;
        case "organizationInvitation.created":
        case "organizationInvitation.updated":
        case "organizationInvitation.deleted":
          assert.equal(m.data.organizationId, orgId);
          assert.equal(m.data.deletedAt !== null, m.type === "organizationInvitation.deleted");
          break;
        case "subscription.created":
        case "subscription.updated":
          assert.equal(m.data.id, subscriptionId);
          break;
        case "subscriptionItem.created":
        case "subscriptionItem.updated":
          assert.equal(m.data.payer.id, payerId);
          break;
        case "paymentAttempt.created":
        case "paymentAttempt.updated":
          assert.equal(m.data.paymentId, paymentId);
          break;
        case "plan.changed":
          assert.equal(m.data.payer.id, payerId);
          assert.ok(m.data.plan !== null);
          break;
        case "usersync.test":
          assert.equal(m.data.endpointId, ep.json.id);
          break;
      }
    }
    assert.equal((await admin("DELETE", `/v1/endpoints/${ep.json.id}`)).status, 204);
  } finally {
    app.close();
  }
});

test("the client reads every route's data", { skip: noServer }, async () => {
  // testdata/outbound deleted its user and organization: a payer who is a
  // user, and an organization with the payer as its member, besides.
  await deliver(fixture("user.created.json", (e) => (e.data.id = payerId)));
  await deliver(fixture("openapi.organization.created.json", (e) => Object.assign(e.data, { id: "org_2tsreads", slug: "ts-reads" })));
  await deliver(
    fixture("openapi.organizationMembership.created.json", (e) => {
      Object.assign(e.data, { id: "orgmem_2tsreads" });
      Object.assign(e.data.organization, { id: "org_2tsreads", slug: "ts-reads" });
      e.data.public_user_data.user_id = payerId;
    }),
  );

  const payer = await api.user(payerId);
  assert.equal(payer.userId, payerId);
  assert.deepEqual((await all(api.users({ email: payer.email }))).map((u) => u.userId), [payerId]);
  await assert.rejects(api.user(userId), (e) => isNotFound(e));
  assert.notEqual((await adminApi.userIncludingDeleted(userId)).deletedAt, null);
  assert.equal((await all(adminApi.users({ includeDeleted: true }))).length, 7);

  assert.equal((await api.organization("org_2tsreads")).slug, "ts-reads");
  assert.deepEqual((await all(api.organizations({ slug: "ts-reads" }))).map((o) => o.organizationId), ["org_2tsreads"]);
  await assert.rejects(api.organization(orgId), (e) => isNotFound(e));
  assert.notEqual((await adminApi.organizationIncludingDeleted(orgId)).deletedAt, null);
  assert.deepEqual((await all(api.organizationMemberships("org_2tsreads"))).map((m) => m.membershipId), ["orgmem_2tsreads"]);
  const mine = await all(api.userMemberships(payerId));
  assert.equal(mine.length, 1);
  assert.equal(mine[0].organization?.organizationId, "org_2tsreads");
  assert.equal((await all(adminApi.organizationMemberships(orgId, { includeDeleted: true }))).length, 1);
  // testdata/outbound's invitation was accepted, then deleted with its organization.
  const invitations = await all(adminApi.organizationInvitations(orgId, { includeDeleted: true }));
  assert.deepEqual(invitations.map((i) => [i.status, i.deletedAt !== null, i.emailAddress]), [["accepted", true, null]]);
  assert.deepEqual(await all(api.organizationInvitations(orgId, { status: "accepted" })), []);
  await assert.rejects(api.organizationInvitation(orgId, invitations[0].invitationId), (e) => isNotFound(e));

  const billing = await api.userBilling(payerId);
  assert.ok(billing.plan?.plan, JSON.stringify(billing));
  assert.ok(billing.items.length > 0);
  assert.equal(billing.payer.inCopy, true);
  assert.equal((await api.organizationBilling("org_2tsreads")).plan, null);
  assert.equal((await adminApi.subscription(subscriptionId)).status, "past_due");
  assert.equal((await all(adminApi.subscriptions({ payer: { kind: "user", id: payerId } }))).length, 1);
  const attempts = await all(adminApi.paymentAttempts({ paymentId }));
  assert.deepEqual(attempts.map((a) => a.status), ["paid"]);

  const events = await all(adminApi.events({ kind: "user", userId }));
  assert.deepEqual(events.map((e) => e.type), ["user.deleted", "user.updated", "user.created"]);
  assert.ok((await adminApi.event(events[0].eventId!)).payload);
  assert.ok(((await adminApi.eventStats()).status.processed ?? 0) > 0);
  const catalog = await adminApi.eventTypes();
  const userCreated = catalog.types.find((t) => t.type === "user.created");
  assert.equal(userCreated?.fate, "applied");
  assert.ok((userCreated?.received ?? 0) > 0 && userCreated?.lastReceivedAt, JSON.stringify(userCreated));

  // A page at a time.
  const first = await adminApi.users({ includeDeleted: true, limit: 3 }).page();
  assert.equal(first.items.length, 3);
  const second = await adminApi.users({ includeDeleted: true, limit: 3 }).page(first.nextCursor!);
  assert.equal(second.items.length, 3);
  assert.ok(!second.items.some((u) => first.items.some((f) => f.userId === u.userId)));
});

test("an error carries the API's code and request id", { skip: noServer }, async () => {
  // Each request is sent when its case is checked: one sent before would
  // reject with no handler yet.
  const cases: [string, () => Promise<unknown>, number, string][] = [
    ["the event log with an API key", () => api.eventStats(), 403, "forbidden"],
    ["the event types with an API key", () => api.eventTypes(), 403, "forbidden"],
    ["an unknown key", () => new Usersync(env.url, "usk_nobody").user(payerId), 401, "unauthorized"],
    ["a page of 500", () => api.users({ limit: 500 }).page(), 400, "invalid_request"],
    ["a sync without CLERK_SECRET_KEY", () => api.syncUser(payerId), 501, "not_configured"],
  ];
  for (const [what, send, status, code] of cases) {
    await assert.rejects(send(), (e) => {
      assert.ok(e instanceof UsersyncError, what);
      assert.equal(e.status, status, what);
      assert.equal(e.code, code, what);
      assert.ok(e.requestId, what);
      return true;
    });
  }
});

test("the change feed is walked from a saved cursor", { skip: noServer }, async () => {
  // Changes are served once they are 30 s old.
  const wait = lastDelivery + 30_500 - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));

  const feed = api.userChanges({ limit: 2 });
  const first = await feed.next();
  assert.deepEqual(first.items.map((u) => u.userId), ["user_2tsfeed0", "user_2tsfeed1"]);
  assert.equal(feed.cursor, first.cursor);
  const saved = first.cursor;

  // Another process goes on from the saved cursor.
  const resumed = new Usersync(env.url, env.apiKey).userChanges({ cursor: saved, limit: 2 });
  const ids: string[] = [];
  let caughtUp = false;
  for await (const page of resumed.pages()) {
    ids.push(...page.items.map((u) => u.userId));
    caughtUp = page.caughtUp;
  }
  assert.ok(caughtUp);
  assert.deepEqual(ids.filter((id) => id.startsWith("user_2tsfeed")), ["user_2tsfeed2", "user_2tsfeed3", "user_2tsfeed4"]);
  assert.deepEqual(ids.slice(3).sort(), [payerId, userId].sort(), "the other users, each once");
  const deleted = (await all(api.userChanges().pages())).flatMap((p) => p.items).find((u) => u.userId === userId);
  assert.ok(deleted && isDeleted(deleted) && !("displayName" in deleted), "a deleted user comes as its tombstone");

  // The other feeds.
  const orgs = (await all(api.organizationChanges().pages())).flatMap((p) => p.items);
  assert.deepEqual(orgs.map((o) => o.organizationId).sort(), [orgId, "org_2tsreads"].sort());
  const memberships = (await all(api.membershipChanges().pages())).flatMap((p) => p.items);
  assert.equal(memberships.length, 2);
  const plans = (await all(api.planChanges().pages())).flatMap((p) => p.items);
  assert.deepEqual(plans.map((p) => p.payer.id), [payerId]);
});
