// The shapes of usersync's REST API and outbound messages, by name: each
// is a schema of the OpenAPI document, whose types src/schema.ts holds
// (generated: npm run generate).
import type { components } from "./schema.js";

type Schemas = components["schemas"];

export type User = Schemas["User"];
/** A deleted user in the users' change feed: its id and times. */
export type DeletedUser = Schemas["DeletedUser"];
export type Organization = Schemas["Organization"];
/** A deleted organization in its change feed. */
export type DeletedOrganization = Schemas["DeletedOrganization"];
export type Membership = Schemas["Membership"];
/** A deleted membership in its change feed: its ids and times. */
export type DeletedMembership = Schemas["DeletedMembership"];
export type Member = Schemas["Member"];
/** An organization invitation: its status as it reads now (a pending one past expiresAt is expired). */
export type Invitation = Schemas["Invitation"];
export type Billing = Schemas["Billing"];
/** A payer: a user or an organization (a billing read's says inCopy too). */
export type Payer = Schemas["PlanChange"]["payer"];
export type PayerPlan = Schemas["PayerPlan"];
export type BillingPlan = Schemas["BillingPlan"];
export type SubscriptionItem = Schemas["SubscriptionItem"];
export type PlanChange = Schemas["PlanChange"];
export type Subscription = Schemas["Subscription"];
export type PaymentAttempt = Schemas["PaymentAttempt"];
export type Event = Schemas["Event"];
export type EventStats = Schemas["EventStats"];
export type EventTypes = Schemas["EventTypes"];

export type UserMessage = Schemas["UserMessage"];
export type OrganizationMessage = Schemas["OrganizationMessage"];
export type MembershipMessage = Schemas["MembershipMessage"];
export type InvitationMessage = Schemas["InvitationMessage"];
export type SubscriptionMessage = Schemas["SubscriptionMessage"];
export type SubscriptionItemMessage = Schemas["SubscriptionItemMessage"];
export type PaymentAttemptMessage = Schemas["PaymentAttemptMessage"];
export type PlanChangedMessage = Schemas["PlanChangedMessage"];
export type TestMessage = Schemas["TestMessage"];

/** An outbound message's body: its type says what its data is. */
export type Message =
  | UserMessage
  | OrganizationMessage
  | MembershipMessage
  | InvitationMessage
  | SubscriptionMessage
  | SubscriptionItemMessage
  | PaymentAttemptMessage
  | PlanChangedMessage
  | TestMessage;

export type MessageType = Message["type"];
