// The verifier of usersync's outbound messages, on the standardwebhooks
// package: Standard Webhooks' signature (HMAC-SHA256 of
// "webhook-id.webhook-timestamp.body" with the endpoint's secret) and
// timestamp (5 minutes either way).
import { Webhook, WebhookVerificationError } from "standardwebhooks";

import type { Message } from "./types.js";

export { WebhookVerificationError };

/** A verified message: its body, typed by its type, and its webhook-id. */
export type VerifiedMessage = Message & {
  /** The webhook-id: the id of this change of this object, the same on every retry and replay of it: the app's idempotency key. */
  id: string;
};

/**
 * Verifies the messages of one endpoint. Give it the endpoint's secret
 * ("whsec_…"), and during a rotation the new one and the old one: a
 * message signed by either verifies.
 */
export class Verifier {
  private readonly webhooks: Webhook[];

  constructor(...secrets: string[]) {
    if (secrets.length === 0) throw new Error("usersync: a verifier needs a secret");
    this.webhooks = secrets.map((s) => new Webhook(s));
  }

  /**
   * Checks that body, exactly as it arrived (read it raw: not through a
   * JSON body parser), is signed under headers, and returns it parsed.
   * Throws a WebhookVerificationError when it does not verify: answer it
   * 400, and process nothing.
   */
  verify(body: string | Buffer, headers: Headers | Record<string, string | string[] | undefined>): VerifiedMessage {
    const h = plainHeaders(headers);
    let err: unknown;
    for (const wh of this.webhooks) {
      try {
        const m = wh.verify(body, h) as Message;
        return { ...m, id: h["webhook-id"] };
      } catch (e) {
        err = e;
      }
    }
    throw err;
  }
}

/** The webhook-* headers of headers, by their lower-case names. */
function plainHeaders(headers: Headers | Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  const names = ["webhook-id", "webhook-timestamp", "webhook-signature"];
  if (typeof (headers as Headers).get === "function") {
    for (const n of names) out[n] = (headers as Headers).get(n) ?? "";
    return out;
  }
  for (const [k, v] of Object.entries(headers)) {
    if (names.includes(k.toLowerCase()) && v !== undefined) out[k.toLowerCase()] = Array.isArray(v) ? v.join(" ") : v;
  }
  return out;
}
