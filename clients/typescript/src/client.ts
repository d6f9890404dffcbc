// A client of usersync's REST API: every read, lists walked a page at a
// time, change feeds walked from a saved cursor, errors with the API's
// code and request id, and 429 and 503 tried again after Retry-After.
import type {
  Billing,
  DeletedMembership,
  DeletedOrganization,
  DeletedUser,
  Event,
  EventStats,
  EventTypes,
  Invitation,
  Membership,
  Organization,
  Payer,
  PaymentAttempt,
  PlanChange,
  Subscription,
  User,
} from "./types.js";

/** An answer of usersync other than 2xx. */
export class UsersyncError extends Error {
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The API's code of the error: not_found, forbidden, overloaded… (docs/api.md). */
    readonly code: string,
    message: string,
    /** Names the request in usersync's log. */
    readonly requestId: string,
    /** How long the answer asked to wait before trying again (Retry-After), if it said. */
    readonly retryAfterSeconds?: number,
  ) {
    super(`usersync: ${status} ${code}: ${message} (request ${requestId})`);
    this.name = "UsersyncError";
  }

  /** A 429 or a 503: the same request may succeed later. */
  get temporary(): boolean {
    return this.status === 429 || this.status === 503;
  }
}

/** Whether e is usersync's 404: no such object (for an API key, a deleted one neither). */
export function isNotFound(e: unknown): boolean {
  return e instanceof UsersyncError && e.status === 404;
}

/**
 * Whether an object is deleted: in a change feed, its tombstone (only its
 * ids and times); in an admin's read, deletedAt set. Its false branch
 * narrows a feed's item to the whole object.
 */
export function isDeleted<T extends { deletedAt: string | null }>(item: T): item is T & { deletedAt: string } {
  return item.deletedAt !== null;
}

export type Options = {
  /** The fetch to send requests with; globalThis.fetch by default. */
  fetch?: typeof fetch;
  /** How many times a request answered 429 or 503 is sent again; 3 by default. */
  retries?: number;
  /** The longest wait before sending a request again, in seconds: an answer that asks for longer is thrown as it is. 30 by default. */
  maxWaitSeconds?: number;
};

type Query = Record<string, string | number | boolean | undefined>;

/** One page of a list; nextCursor is null after the last. */
export type Page<T> = { items: T[]; nextCursor: string | null };

/** A list of the API with its filters: read it a page at a time, or walk its items (for await). */
export class List<T> implements AsyncIterable<T> {
  constructor(
    private readonly client: Usersync,
    private readonly path: string,
    private readonly query: Query,
  ) {}

  /** The page that starts at cursor: none for the first, else the nextCursor of the page before. */
  async page(cursor?: string): Promise<Page<T>> {
    const p = await this.client.get<{ data: T[]; nextCursor: string | null }>(this.path, { ...this.query, cursor });
    return { items: p.data, nextCursor: p.nextCursor };
  }

  /** Every item, from the first page on, read a page at a time. */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    let cursor: string | undefined;
    do {
      const p = await this.page(cursor);
      yield* p.items;
      cursor = p.nextCursor ?? undefined;
    } while (cursor);
  }
}

/** One page of a change feed. */
export type Changes<T> = {
  /** The objects that changed, oldest change first; a deleted one as its tombstone (deletedAt set). */
  items: T[];
  /** Where the feed goes on after this page: save it once the items are applied, and start the next walk from it. */
  cursor: string;
  /** A short page: nothing more to read now (a page is also cut at about 4 MiB); poll again later. Changes are served 30 s after they applied. */
  caughtUp: boolean;
};

export type FeedOptions = {
  /** A cursor saved by an earlier walk (Changes.cursor, Feed.cursor); none: from since. */
  cursor?: string;
  /** The oldest change wanted; none: every change. */
  since?: Date;
  /** Changes per page, 1 to 200; 200 by default. */
  limit?: number;
};

/** A change feed walked from a cursor. */
export class Feed<T> {
  /** Where the feed goes on: the cursor it started from, or that of the last page read. */
  cursor: string | undefined;
  private readonly since: string;
  private readonly limit: number;

  constructor(
    private readonly client: Usersync,
    private readonly path: string,
    o: FeedOptions = {},
  ) {
    this.cursor = o.cursor;
    this.since = (o.since ?? new Date(0)).toISOString();
    this.limit = o.limit ?? maxLimit;
  }

  /** The page after the feed's cursor; the cursor moves past it. */
  async next(): Promise<Changes<T>> {
    const ch = await this.read();
    this.cursor = ch.cursor;
    return ch;
  }

  private async read(): Promise<Changes<T>> {
    const p = await this.client.get<{ data: T[]; nextCursor: string }>(this.path, {
      updatedSince: this.since,
      limit: this.limit,
      cursor: this.cursor,
    });
    return { items: p.data, cursor: p.nextCursor || this.cursor || "", caughtUp: p.data.length < this.limit };
  }

  /**
   * The pages from the feed's cursor until it is caught up. The cursor
   * moves past a page once the loop's body for it is done: a body that
   * breaks out leaves it before that page.
   */
  async *pages(): AsyncGenerator<Changes<T>> {
    for (;;) {
      const ch = await this.read();
      yield ch;
      this.cursor = ch.cursor;
      if (ch.caughtUp) return;
    }
  }

  /** The pages as pages() walks them, without end: caught up, it waits pollMs and reads again, until signal aborts. */
  async *follow(pollMs = 30_000, signal?: AbortSignal): AsyncGenerator<Changes<T>> {
    while (!signal?.aborted) {
      const ch = await this.read();
      if (signal?.aborted) return;
      yield ch;
      this.cursor = ch.cursor;
      if (!ch.caughtUp) continue;
      await sleep(pollMs, signal);
    }
  }
}

export type UserQuery = {
  /** The active user with this email. */
  email?: string;
  /** Deleted and deprovisioned users too (an admin key). */
  includeDeleted?: boolean;
  limit?: number;
};
export type OrganizationQuery = { slug?: string; includeDeleted?: boolean; limit?: number };
/** Without includeDeleted (an admin key), only the active memberships. */
export type MembershipQuery = { includeDeleted?: boolean; limit?: number };
/** An organization's invitations: of one status as they read now, those deleted with their organization too with includeDeleted (an admin key). */
export type InvitationQuery = {
  status?: "pending" | "accepted" | "revoked" | "expired";
  includeDeleted?: boolean;
  limit?: number;
};
export type SubscriptionQuery = { payer?: Payer; status?: string; limit?: number };
export type PaymentAttemptQuery = { paymentId?: string; payer?: Payer; limit?: number };
export type EventQuery = {
  status?: "stored" | "processed" | "failed" | "discarded";
  /** A change (updated) or a type (user.updated). */
  eventType?: string;
  kind?: "user" | "organization" | "membership" | "invitation" | "subscription" | "subscription_item" | "payment_attempt";
  userId?: string;
  objectId?: string;
  since?: Date;
  until?: Date;
  limit?: number;
};

/** The largest page the API serves, and the client's default. */
const maxLimit = 200;

/**
 * A client of one usersync with one key: an API key reads the copy, an
 * admin key also the deleted objects, the event log and Clerk Billing's
 * subscriptions and payment attempts. Keep the key on a server.
 */
export class Usersync {
  private readonly base: string;
  private readonly fetch: typeof fetch;
  private readonly retries: number;
  private readonly maxWaitSeconds: number;

  constructor(
    baseUrl: string,
    private readonly key: string,
    o: Options = {},
  ) {
    this.base = baseUrl.replace(/\/+$/, "");
    this.fetch = o.fetch ?? globalThis.fetch;
    this.retries = o.retries ?? 3;
    this.maxWaitSeconds = o.maxWaitSeconds ?? 30;
  }

  /** An active user; throws a UsersyncError that isNotFound when there is none, or it is deleted. */
  user(userId: string): Promise<User> {
    return this.get(`/v1/users/${encodeURIComponent(userId)}`);
  }
  /** A user, deleted or not (an admin key): a deleted one as its tombstone. */
  userIncludingDeleted(userId: string): Promise<User> {
    return this.get(`/v1/users/${encodeURIComponent(userId)}`, { includeDeleted: true });
  }
  /** Reads the user from Clerk now and applies it (the sign-up race); isNotFound when Clerk has none. */
  syncUser(userId: string): Promise<User> {
    return this.call("POST", `/v1/users/${encodeURIComponent(userId)}/sync`);
  }
  /** The active users, every user with includeDeleted. */
  users(q: UserQuery = {}): List<User> {
    return this.list("/v1/users", q);
  }
  /** The users' change feed; a deprovisioned user comes whole, deprovisioned set. */
  userChanges(o?: FeedOptions): Feed<User | DeletedUser> {
    return new Feed(this, "/v1/users", o);
  }

  /** An active organization; isNotFound when there is none, or it is deleted. */
  organization(orgId: string): Promise<Organization> {
    return this.get(`/v1/organizations/${encodeURIComponent(orgId)}`);
  }
  /** An organization, deleted or not (an admin key). */
  organizationIncludingDeleted(orgId: string): Promise<Organization> {
    return this.get(`/v1/organizations/${encodeURIComponent(orgId)}`, { includeDeleted: true });
  }
  /** Reads the organization from Clerk now and applies it; isNotFound when Clerk has none. */
  syncOrganization(orgId: string): Promise<Organization> {
    return this.call("POST", `/v1/organizations/${encodeURIComponent(orgId)}/sync`);
  }
  organizations(q: OrganizationQuery = {}): List<Organization> {
    return this.list("/v1/organizations", q);
  }
  organizationMemberships(orgId: string, q: MembershipQuery = {}): List<Membership> {
    return this.list(`/v1/organizations/${encodeURIComponent(orgId)}/memberships`, q);
  }
  /** An organization's invitations, in invitation id order. */
  organizationInvitations(orgId: string, q: InvitationQuery = {}): List<Invitation> {
    return this.list(`/v1/organizations/${encodeURIComponent(orgId)}/invitations`, q);
  }
  /** One invitation of an organization; isNotFound when there is none, or it was deleted with its organization. */
  organizationInvitation(orgId: string, invitationId: string): Promise<Invitation> {
    return this.get(`/v1/organizations/${encodeURIComponent(orgId)}/invitations/${encodeURIComponent(invitationId)}`);
  }
  /** A user's memberships, each with its organization. */
  userMemberships(userId: string, q: MembershipQuery = {}): List<Membership> {
    return this.list(`/v1/users/${encodeURIComponent(userId)}/memberships`, q);
  }
  organizationChanges(o?: FeedOptions): Feed<Organization | DeletedOrganization> {
    return new Feed(this, "/v1/organizations", o);
  }
  /** Every membership's change feed: a deletion of an organization or a user moves the memberships it deletes. */
  membershipChanges(o?: FeedOptions): Feed<Membership | DeletedMembership> {
    return new Feed(this, "/v1/memberships", o);
  }

  /** A user's Clerk Billing: its plan (null: none) and items. */
  userBilling(userId: string): Promise<Billing> {
    return this.get(`/v1/users/${encodeURIComponent(userId)}/billing`);
  }
  organizationBilling(orgId: string): Promise<Billing> {
    return this.get(`/v1/organizations/${encodeURIComponent(orgId)}/billing`);
  }
  /** The plans' change feed: each payer whose plan changed. */
  planChanges(o?: FeedOptions): Feed<PlanChange> {
    return new Feed(this, "/v1/billing/plans", o);
  }
  /** A subscription (an admin key). */
  subscription(subscriptionId: string): Promise<Subscription> {
    return this.get(`/v1/billing/subscriptions/${encodeURIComponent(subscriptionId)}`);
  }
  subscriptions(q: SubscriptionQuery = {}): List<Subscription> {
    return this.list("/v1/billing/subscriptions", { payerKind: q.payer?.kind, payerId: q.payer?.id, status: q.status, limit: q.limit });
  }
  paymentAttempts(q: PaymentAttemptQuery = {}): List<PaymentAttempt> {
    return this.list("/v1/billing/payment-attempts", {
      payerKind: q.payer?.kind,
      payerId: q.payer?.id,
      paymentId: q.paymentId,
      limit: q.limit,
    });
  }

  /** One event of the log, with its payload (an admin key). */
  event(id: string): Promise<Event> {
    return this.get(`/v1/events/${encodeURIComponent(id)}`);
  }
  /** The event log, newest first, without payloads (an admin key). */
  events(q: EventQuery = {}): List<Event> {
    return this.list("/v1/events", { ...q, since: q.since?.toISOString(), until: q.until?.toISOString() });
  }
  eventStats(): Promise<EventStats> {
    return this.get("/v1/events/stats");
  }
  /**
   * Clerk's event types, each with its fate (applied, projected or
   * ignored) and its deliveries, and the unknown types received: counts
   * of the answering process since it started (an admin key).
   */
  eventTypes(): Promise<EventTypes> {
    return this.get("/v1/event-types");
  }

  private list<T>(path: string, q: Query): List<T> {
    return new List<T>(this, path, { ...q, limit: q.limit ?? maxLimit });
  }

  /** GET path?query: the answer's JSON. */
  get<T>(path: string, query: Query = {}): Promise<T> {
    return this.call("GET", path, query);
  }

  /** Sends method path?query, again after a 429 or a 503, and reads the answer's JSON. */
  private async call<T>(method: "GET" | "POST", path: string, query: Query = {}): Promise<T> {
    const url = new URL(this.base + path);
    for (const [k, v] of Object.entries(query)) {
      if (v !== undefined && v !== "" && v !== false) url.searchParams.set(k, String(v));
    }
    for (let attempt = 0; ; attempt++) {
      const res = await this.fetch(url, { method, headers: { Authorization: `Bearer ${this.key}`, Accept: "application/json" } });
      if (res.ok) return (await res.json()) as T;
      const e = await errorOf(res);
      if (!e.temporary || attempt >= this.retries) throw e;
      const wait = e.retryAfterSeconds ?? 2 ** attempt;
      if (wait > this.maxWaitSeconds) throw e;
      await sleep(wait * 1000);
    }
  }
}

/** The UsersyncError of an answer other than 2xx. */
async function errorOf(res: Response): Promise<UsersyncError> {
  let body: { error?: { code?: string; message?: string; requestId?: string } } = {};
  try {
    body = (await res.json()) as typeof body;
  } catch {
    // Not usersync's JSON (a proxy's page): the status says it all.
  }
  const e = body.error ?? {};
  return new UsersyncError(
    res.status,
    e.code ?? "unknown",
    e.message || res.statusText,
    e.requestId ?? res.headers.get("X-Request-Id") ?? "",
    retryAfter(res.headers.get("Retry-After")),
  );
}

/** A Retry-After header in seconds (seconds, or an HTTP date); undefined when there is none. */
function retryAfter(h: string | null): number | undefined {
  if (h === null || h === "") return undefined;
  if (/^\d+$/.test(h)) return Number(h);
  const t = Date.parse(h);
  return Number.isNaN(t) ? undefined : Math.max(0, Math.ceil((t - Date.now()) / 1000));
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal?.removeEventListener("abort", done);
      resolve();
    }
  });
}
