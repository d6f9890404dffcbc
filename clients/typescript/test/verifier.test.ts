// The verifier of outbound messages, against what the standardwebhooks
// package signs.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Webhook } from "standardwebhooks";

import { Verifier, WebhookVerificationError } from "../src/index.js";

const secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const other = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const body = JSON.stringify({
  type: "user.updated",
  timestamp: "2026-11-27T10:15:02.114Z",
  data: { userId: "user_2abc", email: "ada@example.com", deletedAt: null },
  changed: ["email"],
  origin: "webhook",
});

function headers(s: string, at = new Date(), id = "msg_1", payload = body): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(s).sign(id, at, payload),
  };
}

test("a signed message verifies and parses, with either secret of a rotation", () => {
  for (const v of [new Verifier(secret), new Verifier(other, secret)]) {
    const m = v.verify(body, headers(secret));
    assert.equal(m.id, "msg_1");
    assert.equal(m.type, "user.updated");
    if (m.type === "user.updated") assert.equal(m.data.email, "ada@example.com");
  }
  const h = headers(secret);
  h["webhook-signature"] = `v1,${Buffer.alloc(32).toString("base64")} ${h["webhook-signature"]}`;
  assert.equal(new Verifier(secret).verify(Buffer.from(body), new Headers(h)).id, "msg_1", "one of two signatures");
});

test("a tampered body, a stale timestamp or another secret does not verify", () => {
  const v = new Verifier(secret);
  const cases: [string, string, Record<string, string>][] = [
    ["a tampered body", body.replace("ada@", "eve@"), headers(secret)],
    ["another id", body, { ...headers(secret), "webhook-id": "msg_2" }],
    ["six minutes old", body, headers(secret, new Date(Date.now() - 6 * 60_000))],
    ["six minutes ahead", body, headers(secret, new Date(Date.now() + 6 * 60_000))],
    ["another secret", body, headers(other)],
    ["no signature", body, { ...headers(secret), "webhook-signature": "" }],
  ];
  for (const [what, b, h] of cases) {
    assert.throws(() => v.verify(b, h), WebhookVerificationError, what);
  }
});
