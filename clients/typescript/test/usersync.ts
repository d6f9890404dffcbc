// What the tests need of a real usersync: its address and keys (from the
// environment; scripts/check-typescript.sh starts one), Clerk deliveries
// signed as Svix signs them, and the steps of testdata/outbound.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { Webhook } from "standardwebhooks";

/** The repository's root: the tests run in clients/typescript. */
export const root = resolve(process.cwd(), "..", "..");

export const env = {
  url: process.env.USERSYNC_URL ?? "",
  apiKey: process.env.USERSYNC_API_KEY ?? "",
  adminKey: process.env.USERSYNC_ADMIN_KEY ?? "",
  clerkSecret: process.env.CLERK_WEBHOOK_SECRET ?? "",
};

/** Why the tests against a usersync are skipped; false when they run. */
export const noServer: string | false =
  env.url && env.apiKey && env.adminKey && env.clerkSecret
    ? false
    : "no usersync: set USERSYNC_URL, USERSYNC_API_KEY, USERSYNC_ADMIN_KEY and CLERK_WEBHOOK_SECRET (scripts/check-typescript.sh starts one)";

let seq = 0;
/** When the last delivery applied (ms): a change feed serves it 30 s later. */
export let lastDelivery = 0;

/** Posts body to the webhook, signed as Svix would now; it must apply. */
export async function deliver(body: string): Promise<void> {
  const id = `msg_ts_${Date.now()}_${++seq}`;
  const now = new Date();
  const signature = new Webhook(env.clerkSecret).sign(id, now, body);
  const res = await fetch(`${env.url}/webhooks/clerk`, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      "svix-id": id,
      "svix-timestamp": String(Math.floor(now.getTime() / 1000)),
      "svix-signature": signature,
    },
    body,
  });
  if (res.status !== 200) throw new Error(`deliver ${body.slice(0, 80)}: ${res.status} ${await res.text()}`);
  lastDelivery = Date.now();
}

/** Sends method path with a JSON body as an admin, and returns the answer's status and JSON. */
export async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(env.url + path, {
    method,
    headers: { Authorization: `Bearer ${env.adminKey}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/** A Clerk payload of models/testdata, with edit's changes to its decoded envelope. */
export function fixture(name: string, edit?: (env: any) => void): string {
  const env = JSON.parse(readFileSync(join(root, "models", "testdata", name), "utf8"));
  edit?.(env);
  return JSON.stringify(env);
}

/** One Clerk delivery of testdata/outbound, and the types of the messages it makes. */
export type Step = { what: string; body: string; types: string[] };

/** The steps of testdata/outbound/steps.json (README.md there). */
export function steps(): Step[] {
  const file = JSON.parse(readFileSync(join(root, "testdata", "outbound", "steps.json"), "utf8"));
  return file.steps.map((s: any) => {
    let body = s.body ?? JSON.parse(readFileSync(join(root, "models", "testdata", s.fixture), "utf8"));
    if (s.patch) body = mergePatch(body, s.patch);
    return { what: s.what, body: JSON.stringify(body), types: s.types };
  });
}

/** doc with the JSON merge patch patch applied (RFC 7396). */
function mergePatch(doc: any, patch: any): any {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const out = doc !== null && typeof doc === "object" && !Array.isArray(doc) ? { ...doc } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** Waits until ok() holds, polling, or throws after timeoutMs. */
export async function waitFor(what: string, ok: () => boolean, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
