package api

import "github.com/labstack/echo/v4"

// routes is the whole HTTP surface with its auth, at a glance.
func (s *server) routes(e *echo.Echo) {
	// Anyone.
	e.GET("/healthz", s.healthz)
	e.HEAD("/healthz", s.healthz) // load balancers that probe with HEAD
	e.GET("/readyz", s.readyz)
	e.HEAD("/readyz", s.readyz)
	e.GET("/metrics", s.metrics.handler())
	e.GET("/openapi.json", s.openAPI)
	// The operator's console: static files, the same for everyone; its data
	// come from the admin API below, with the key the operator types in.
	e.GET("/admin", s.console)
	e.GET("/admin/", s.console)
	e.GET("/admin/:file", s.console)

	// Svix, signed with a webhook secret (checked in the handler, on the raw body).
	e.POST("/webhooks/clerk", s.clerkWebhook)

	// API or admin key; admin-only options are checked in the handlers.
	v1 := e.Group("/v1", s.requireKey(roleAPI))
	v1.GET("/users", s.listUsers)
	v1.GET("/users/:userId", s.getUser)
	v1.POST("/users/:userId/sync", s.syncUser)
	v1.POST("/users/:userId/erase", s.eraseUser, s.requireKey(roleAdmin))
	v1.GET("/users/:userId/memberships", s.listMemberships)
	v1.GET("/organizations", s.listOrganizations)
	v1.GET("/organizations/:orgId", s.getOrganization)
	v1.GET("/organizations/:orgId/memberships", s.listMemberships)
	v1.GET("/memberships", s.membershipFeed)

	// Admin key: events hold whole payloads, private metadata included.
	admin := e.Group("/v1/events", s.requireKey(roleAdmin))
	admin.GET("", s.listEvents)
	admin.GET("/stats", s.eventStats)
	admin.GET("/failures", s.eventFailures)
	admin.POST("/replay", s.replayEvents)
	admin.GET("/:id", s.getEvent)
	admin.POST("/:id/replay", s.replayEvent)

	// Admin key: the console's views of the service.
	adminOnly := s.requireKey(roleAdmin)
	e.GET("/v1/admin/overview", s.overview, adminOnly)
	e.GET("/v1/admin/activity", s.activity, adminOnly)
	e.GET("/v1/reconcile/runs", s.reconcileRuns, adminOnly)
	e.GET("/v1/reconcile/dry-run", s.dryRunState, adminOnly)
	e.POST("/v1/reconcile/dry-run", s.startDryRun, adminOnly)
}
