// @usersync/client: reads usersync's copy of an application's Clerk users,
// organizations, memberships, invitations and Clerk Billing, and verifies and parses
// the outbound webhooks it sends.
export * from "./client.js";
export * from "./messages.js";
export type * from "./types.js";
export type { components, paths, webhooks } from "./schema.js";
