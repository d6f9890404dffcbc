package api

import "github.com/labstack/echo/v4"

// routes is the whole HTTP surface with its auth, at a glance.
func (s *server) routes(e *echo.Echo) {
	// Anyone.
	e.GET("/healthz", s.healthz)
	e.HEAD("/healthz", s.healthz) // load balancers that probe with HEAD
	e.GET("/readyz", s.readyz)
	e.HEAD("/readyz", s.readyz)
	e.GET("/metrics", s.metrics.handler(), s.requireMetricsKey) // open unless a metrics key is set
	e.GET("/openapi.json", s.openAPI)
	// The operator's console: static files, the same for everyone; its data
	// come from the admin API below, with the key the operator types in.
	e.GET("/admin", s.console)
	e.GET("/admin/", s.console)
	e.GET("/admin/:file", s.console)

	// Svix, signed with a webhook secret (checked in the handler, on the raw body);
	// on a listener of its own instead when the webhook is apart.
	if !s.webhookApart {
		e.POST("/webhooks/clerk", s.clerkWebhook)
	}

	// Keys are checked per route, not by a group's middleware: echo routes
	// every method of a group with middleware to it, which would answer a
	// wrong method 404 instead of 405 with Allow.
	apiKey, adminKey := s.requireKey(roleAPI), s.requireKey(roleAdmin)

	// API or admin key; admin-only options are checked in the handlers.
	v1 := e.Group("/v1")
	v1.GET("/users", s.listUsers, apiKey)
	v1.GET("/users/:userId", s.getUser, apiKey)
	v1.POST("/users/:userId/sync", s.syncUser, apiKey)
	v1.POST("/users/:userId/erase", s.eraseUser, adminKey)
	v1.GET("/users/:userId/memberships", s.listMemberships, apiKey)
	v1.GET("/users/:userId/billing", s.userBilling, apiKey)
	v1.GET("/organizations", s.listOrganizations, apiKey)
	v1.GET("/organizations/:orgId", s.getOrganization, apiKey)
	v1.POST("/organizations/:orgId/sync", s.syncOrganization, apiKey)
	v1.GET("/organizations/:orgId/memberships", s.listMemberships, apiKey)
	v1.GET("/organizations/:orgId/invitations", s.listInvitations, apiKey)
	v1.GET("/organizations/:orgId/invitations/:invitationId", s.getInvitation, apiKey)
	v1.GET("/organizations/:orgId/billing", s.organizationBilling, apiKey)
	v1.GET("/memberships", s.membershipFeed, apiKey)
	v1.GET("/billing/plans", s.planFeed, apiKey)

	// Admin key: events hold whole payloads, private metadata included.
	admin := e.Group("/v1/events")
	admin.GET("", s.listEvents, adminKey)
	admin.GET("/stats", s.eventStats, adminKey)
	admin.GET("/failures", s.eventFailures, adminKey)
	admin.POST("/replay", s.replayEvents, adminKey)
	admin.GET("/:id", s.getEvent, adminKey)
	admin.POST("/:id/replay", s.replayEvent, adminKey)
	admin.POST("/:id/discard", s.discardEvent, adminKey)
	// Admin key: Clerk's event types, what usersync makes of each, and
	// the deliveries of each since the process started.
	e.GET("/v1/event-types", s.eventTypes, adminKey)

	// Admin key: the console's views of the service.
	e.GET("/v1/admin/overview", s.overview, adminKey)
	e.GET("/v1/admin/activity", s.activity, adminKey)
	e.GET("/v1/reconcile/runs", s.reconcileRuns, adminKey)
	e.GET("/v1/reconcile/dry-run", s.dryRunState, adminKey)
	e.POST("/v1/reconcile/dry-run", s.startDryRun, adminKey)
	e.GET("/v1/admin/backup", s.backupState, adminKey)
	e.POST("/v1/admin/backup", s.startBackup, adminKey)

	// Admin key: the endpoints of outbound webhooks.
	e.GET("/v1/endpoints", s.listEndpoints, adminKey)
	e.POST("/v1/endpoints", s.createEndpoint, adminKey)
	e.GET("/v1/endpoints/:id", s.getEndpoint, adminKey)
	e.PATCH("/v1/endpoints/:id", s.patchEndpoint, adminKey)
	e.DELETE("/v1/endpoints/:id", s.deleteEndpoint, adminKey)
	e.POST("/v1/endpoints/:id/rotate-secret", s.rotateSecret, adminKey)
	e.POST("/v1/endpoints/:id/test", s.testEndpoint, adminKey)
	e.GET("/v1/endpoints/:id/attempts", s.listAttempts, adminKey)
	e.GET("/v1/endpoints/:id/deliveries", s.listDeliveries, adminKey)
	e.POST("/v1/endpoints/:id/replay", s.replayDeliveries, adminKey)
	e.POST("/v1/endpoints/:id/resync", s.resyncEndpoint, adminKey)

	// Admin key: Clerk Billing's objects (a payer's plan is read above).
	e.GET("/v1/billing/payment-attempts", s.listPaymentAttempts, adminKey)
	e.GET("/v1/billing/subscriptions", s.listSubscriptions, adminKey)
	e.GET("/v1/billing/subscriptions/:subscriptionId", s.getSubscription, adminKey)
}

// webhookRoutes is the surface of the webhook's own listener: the webhook
// and the liveness probe, nothing else.
func (s *server) webhookRoutes(e *echo.Echo) {
	e.GET("/healthz", s.healthz)
	e.HEAD("/healthz", s.healthz)
	e.POST("/webhooks/clerk", s.clerkWebhook)
}
