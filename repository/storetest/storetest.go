// Package storetest is the behaviour suite every usersync store passes:
// each promise a store keeps (docs/guarantees.md, docs/design.md), written once.
// A store's test calls Run with a function that opens a fresh, empty store:
//
//	func TestBehaviour(t *testing.T) { storetest.Run(t, openFresh) }
package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/usersync/usersync/repository"
)

// Opener opens a fresh, empty store for one test and closes it when the
// test ends.
type Opener func(t testing.TB) repository.Store

// Run runs every test of the suite against the stores open opens.
func Run(t *testing.T, open Opener) {
	for _, tc := range []struct {
		name string
		test func(*testing.T, repository.Store)
	}{
		{"Users_OrderingAndTombstones", testOrderingAndTombstones},
		{"Users_EveryOrderOfDeliveryEndsTheSame", testEveryOrderEndsTheSame},
		{"Users_ConcurrentStatesOfAUserEndOnTheNewest", testConcurrentStates},
		{"Users_MetadataRoundTripsExactly", testMetadataRoundTrip},
		{"Users_EmailIsUniqueAmongActiveUsers", testEmailUnique},
		{"Users_EmailSwapsConvergeInAnyOrder", testEmailSwaps},
		{"Users_ALookAlikeEmailIsAnotherEmail", testEmailLookAlike},
		{"Users_ListPagesAndFilters", testUserList},
		{"Users_ChangesOrderCursorAndUpperBound", testChanges},
		{"Users_WalkActiveSeesEachActiveUserOnce", testWalkActive},
		{"Users_DeprovisionedLeaveTheActiveListBannedAndLockedStay", testDeprovisionedUsers},
		{"Sessions_LastActiveAtFollowsTheNewestActivityInEveryOrderAndSendsNothing", testSessionLastActiveFollowsTheNewestActivity},
		{"Sessions_NeverMoveADeletedUserInEveryOrder", testSessionNeverMovesADeletedUser},
		{"Sessions_CreateAnUnknownUserOnlyFromACompleteStateAndApplyANewerOne", testSessionCreatesAnUnknownUserOnlyFromItsState},
		{"Sessions_TheirEventsAreErasedWithTheirDeletedUser", testSessionEventsAreErasedWithTheirUser},
		{"Sessions_AStoredSessionEventIsAppliedByTheSweepOrAReplayAsDelivered", testSessionStoredEventIsReappliedAsDelivered},
		{"Organizations_OrderingAndTombstones", testOrgOrdering},
		{"Organizations_EveryOrderOfDeliveryEndsTheSame", testOrgEveryOrder},
		{"Organizations_ListPagesAndSlug", testOrgList},
		{"Organizations_AndMemberships_ChangeFeeds", testOrgAndMemberChanges},
		{"Memberships_EveryOrderOfDeliveryEndsTheSame", testMemberEveryOrder},
		{"Memberships_NestedOrganizationIsAppliedUnderTheOrderingRule", testNestedOrganization},
		{"Memberships_DeletedWithTheirOrganizationInEveryOrder", testOrgCascade},
		{"Memberships_DeletedWithTheirUserInEveryOrder", testUserCascade},
		{"Memberships_ARejoinIsANewMembership", testRejoin},
		{"Memberships_OneActivePerOrganizationAndUser", testOnePerPair},
		{"Memberships_MemberComesFromTheUsersCurrentRecord", testMemberFromUser},
		{"Memberships_ListPagesAndFilters", testMemberList},
		{"Organizations_AndMemberships_WalkActiveSeesEachActiveOneOnce", testOrgAndMemberWalk},
		{"Invitations_ClerksExamplesEndOnTheNewestInEveryOrderOfArrival", testInvitationExamplesEveryOrder},
		{"Invitations_DeletedWithTheirOrganizationInEveryOrder", testInvitationOrgCascade},
		{"Invitations_ListPagesAndFiltersByTheStatusTheyReadAsNow", testInvitationList},
		{"Deliver_StoresAppliesAndMarksEveryKind", testDeliverStoresAppliesAndMarks},
		{"Deliver_ADuplicateReportsTheFirstOutcomeAndAppliesNothing", testDeliverDuplicateReportsTheFirstOutcome},
		{"Deliver_AChangeThatCannotApplyLeavesItsEventStored", testDeliverFailedApplyLeavesTheEventStored},
		{"Deliver_ACrashBetweenTheStepsIsHealedByTheNextDeliveryOrTheSweep", testDeliverCrashBetweenStepsIsHealed},
		{"Billing_ASubscriptionAppliesItsItemsAsTheirOwnStates", testBillingSubscriptionAppliesItsItems},
		{"Billing_AnItemOfAPlanChangeAloneIsTheNewPlan", testBillingHalfAPlanChangeIsPending},
		{"Billing_AnUnknownTypeIsProcessedAsIgnoredAndAppliesNothing", testBillingUnknownTypeIsIgnored},
		{"Billing_SubscriptionsPageNewestFirstByPayerStatusOrAll", testBillingSubscriptionsPage},
		{"Billing_PlanChangesFeedInOrderAfterTheCursorWithinTheSettleBound", testBillingPlanChanges},
		{"Billing_AnItemReadsBackWhenUsersyncFirstAndLastWroteIt", testBillingItemWrites},
		{"Events_ARetryIsRecognised", testRetryRecognised},
		{"Events_ConcurrentDeliveriesStoreOneEvent", testConcurrentRecord},
		{"Events_KeepTheBodyExactly", testBodyExact},
		{"Events_GetUnknownIsNotFound", testGetUnknown},
		{"Events_TheFirstOutcomeStays", testFirstOutcome},
		{"Events_LogPagesNewestFirstWithEveryFilter", testEventLog},
		{"Events_LogFiltersByKindAndObject", testEventLogByKindAndObject},
		{"Events_StatsCountWithoutReadingProcessedEvents", testStats},
		{"Events_StatsCountStoredAndFailedEventsPerKind", testStatsPerKind},
		{"Events_StatsOfAnEmptyStoreNameEveryStatusAndOutcome", testEmptyStats},
		{"Events_DueFindsStuckAndRetryableEventsInClerkOrder", testDue},
		{"Events_AClaimHasOneWinner", testClaim},
		{"Events_RetentionDeletesOnlyOldProcessedEvents", testRetention},
		{"Events_OnlyAFailedEventIsDiscardedAndItIsFinished", testDiscard},
		{"Outcomes_AnEventFindingItsObjectDeletedRecordsDeletedForEveryKind", testADeletedObjectIsDeletedForEveryKind},
		{"Outcomes_AnEarlierVersionsDeletedUserReadsAndCountsAsDeleted", testEarlierDeletedUserReadsAsDeleted},
		{"Erasure_ErasesADeletedUsersEventsOnly", testErasure},
		{"Erasure_AnEventAfterTheUserIsErasedIsErasedAtOnce", testEraseLateEvent},
		{"Erasure_PendingEventsAreErasedOnceDone", testErasePending},
		{"Erasure_ADeletedMembershipsEventsGoWhileItsUserStays", testEraseDeletedMembership},
		{"Erasure_MembershipsDeletedByACascadeOrAPairTakenAreErased", testEraseMembershipsOfCascades},
		{"Erasure_EndedInvitationsAreErasedOnTheDeletedUsersSchedule", testEraseEndedInvitations},
		{"Leases_OneHolderAtATime", testLeases},
		{"Leases_AReleasedLeaseIsFreeAtOnce", testLeaseRelease},
		{"Outbound_AChangeThatAppliedIsRecordedWithItAndNothingElseIs", testOutboundRecordsEachChangeThatApplied},
		{"Outbound_AReapplyAfterACrashRecordsTheChangeAgain", testOutboundReapplyRecordsAgain},
		{"Outbound_AStaleEventThatNestsStatesIsRecordedForThem", testOutboundStaleEventThatNests},
		{"Outbound_TheFanoutKeepsTheNewestChangePerEndpointAndObject", testOutboundFanoutKeepsTheNewestChange},
		{"Outbound_ASettleKeepsAChangeQueuedMeanwhile", testOutboundSettleKeepsAChangeQueuedMeanwhile},
		{"Outbound_ABatchOfSettlesSettlesEachAsItsOwn", testOutboundBatchOfSettles},
		{"Outbound_TheOutboxAndTheDeliveriesDueGiveEachEntryOnceWithinTheirLimit", testOutboundReadsWithinLimit},
		{"Outbound_TheOutboxsOldestEntryIsTheFirstRecordedNotFannedOut", testOutboundOldest},
		{"Outbound_EndpointsRoundTripAndTakeTheirDeliveriesWithThem", testOutboundEndpointsRoundTrip},
		{"Outbound_AttemptsPageNewestFirstAndOldOnesAreDeleted", testOutboundAttemptsPageAndAge},
		{"Outbound_ARequeueSendsAgainWholeAndTheBacklogCountsPending", testOutboundRequeueAndBacklog},
		{"Outbound_ErasureKeepsTheDeletionNoticesWithoutWhatWasToldBefore", testOutboundErasureKeepsTheDeletionNotices},
		{"Endpoints_WritesNeverUndoEachOther", testEndpointWritesNeverUndoEachOther},
		{"Endpoints_HealthWritesChangeOnlyTheHealth", testEndpointHealthWritesChangeOnlyTheHealth},
		{"Endpoints_AtMostTheLimitHoweverManyCreatesRace", testEndpointsAtMostMaxHoweverManyCreatesRace},
		{"Endpoints_AFanoutWritesNoDeliveryForAGoneEndpoint", testFanoutWritesNoDeliveryForAGoneEndpoint},
		{"Endpoints_AResyncsProgressIsRecordedWhileItIsTheEndpoints", testEndpointResyncProgressIsTheNewestResyncs},
		{"Outbound_AForcedFanoutSendsTheStateWholeAndFailedOnesAreRequeued", testForcedFanoutSendsTheStateWhole},
		{"Activity_MinuteBucketsAddUpToTheirHour", testActivityAddsUp},
		{"Activity_ConcurrentAddsToABucketAllCount", testActivityConcurrentAdds},
		{"Activity_BucketsPastTheirRetentionAreDeleted", testActivityRetention},
		{"Activity_RefusesKindsThatAreNotNamesAndOtherSizes", testActivityRefusesWhatIsNotAName},
		{"Activity_AnEarlierVersionsDeletedUserCountsAsDeleted", testActivityEarlierDeletedUserIsDeleted},
		{"FailureGroups_CountFailedEventsByReasonWithABound", testFailureGroups},
		{"FailureGroups_OfNoFailureIsAnEmptyList", testFailureGroupsEmpty},
		{"ReconcileRuns_KeepTheLastOnesNewestFirst", testReconcileRuns},
		{"ReconcileRuns_EachKindsCountsRoundTripAndAKindNotReadIsNone", testReconcileRunKinds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.test(t, open(t))
		})
	}
	t.Run("Billing_APayersPlanIsTheSameInEveryOrderOfArrival", func(t *testing.T) { testBillingPlanInEveryOrder(t, open) })
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)

func permutations[T any](xs []T) [][]T {
	if len(xs) <= 1 {
		return [][]T{slices.Clone(xs)}
	}
	var out [][]T
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]T{xs[i]}, p...))
		}
	}
	return out
}

func sorted(xs []string) []string { xs = slices.Clone(xs); slices.Sort(xs); return xs }

// eachOnce reports whether got lists every id of want exactly once and
// nothing else. Pages of organizations and memberships come in an order
// each store keeps stable (SQLite: by Clerk id; MongoDB: by _id, a hash
// of the Clerk id), which the contract does not fix.
func eachOnce(got, want []string) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}
