// Package service wires usersync over a store: the sync service that
// stores and applies Clerk's events, and the HTTP API in front of it.
// serve, the scale benchmark, the load program's tests and the API tests
// all build it here, so that what they run is wired as production is.
package service

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/usersync/usersync/api"
	"github.com/usersync/usersync/outbound"
	"github.com/usersync/usersync/repository"
	"github.com/usersync/usersync/sync"
)

// Options are how the sync service is built, beyond its store.
type Options struct {
	// MaxAttempts is the attempts after which the sweep stops retrying a
	// failed event; 0 keeps sync.DefaultBackoff's.
	MaxAttempts int
	// WrapStore, if set, stands between the sync service and the store's
	// Deliver and Reapply: tests use it to fail, stop or crash a
	// delivery on the path production takes.
	WrapStore func(repository.Store) sync.Store
}

// Sync is the sync service over every kind of store, with o's retry
// policy.
func Sync(store repository.Store, o Options) *sync.Service {
	var deliver sync.Store = store
	if o.WrapStore != nil {
		deliver = o.WrapStore(store)
	}
	svc := sync.New(store.Events(), deliver, nil)
	if o.MaxAttempts > 0 {
		b := sync.DefaultBackoff
		b.MaxAttempts = o.MaxAttempts
		svc.SetBackoff(b)
	}
	return svc
}

// API is c with what the API reads and writes filled in where c leaves it
// unset: svc ingests, and store serves every read, the erasures and the
// health check. c brings the keys, the secrets and the rest of the
// settings; backups stay the caller's choice (serve offers them with the
// embedded store), since they write files beside the store.
func API(store repository.Store, svc *sync.Service, c api.Config) api.Config {
	if c.Sync == nil {
		c.Sync = svc
	}
	if c.Users == nil {
		c.Users = store.Users()
	}
	if c.Organizations == nil {
		c.Organizations = store.Organizations()
	}
	if c.Memberships == nil {
		c.Memberships = store.Memberships()
	}
	if c.Invitations == nil {
		c.Invitations = store.Invitations()
	}
	if c.Billing == nil {
		c.Billing = store.Billing()
	}
	if c.Events == nil {
		c.Events = store.Events()
	}
	if c.Eraser == nil {
		c.Eraser = store
	}
	if c.DB == nil {
		c.DB = store
	}
	return c
}

// New is usersync over store on one address: the sync service built with
// o, and the API of c (see API) in front of it.
func New(store repository.Store, o Options, c api.Config) (*echo.Echo, *sync.Service, error) {
	svc := Sync(store, o)
	e, err := api.New(API(store, svc, c))
	if err != nil {
		return nil, nil, err
	}
	return e, svc, nil
}

// OutboundOptions are how outbound webhooks are built.
type OutboundOptions struct {
	// AllowPrivate: endpoints on loopback and private addresses are
	// allowed (USERSYNC_ENDPOINTS_ALLOW_PRIVATE).
	AllowPrivate bool
	// AllowHTTP: endpoints may be on plain http to public addresses
	// (USERSYNC_ENDPOINTS_ALLOW_HTTP).
	AllowHTTP bool
	// Owner names this instance in the dispatcher's lease.
	Owner string
	// Now and Jitter are the dispatcher's clock and the retry schedule's
	// jitter; nil: the real ones.
	Now    func() time.Time
	Jitter func() float64
	// Timeout bounds a request to an endpoint; 0: outbound.DefaultTimeout.
	Timeout  time.Duration
	Log      *slog.Logger
	Observer outbound.Observer
	// Lease is the dispatcher's lease; 0: its default.
	Lease time.Duration
	// BillingGrace is how long a plan reads as pending (api.Config's);
	// a plan.changed waits for the plan to settle.
	BillingGrace time.Duration
}

// Outbound is outbound webhooks over store: the dispatcher, woken by each
// change svc applies, and what the API's endpoints routes need. The
// caller runs the dispatcher (Run), or steps it (tests).
func Outbound(store repository.Store, svc *sync.Service, o OutboundOptions) (*outbound.Dispatcher, *api.Outbound) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = outbound.DefaultTimeout
	}
	sender := outbound.NewSender(outbound.SenderOptions{AllowPrivate: o.AllowPrivate, AllowHTTP: o.AllowHTTP, Timeout: timeout})
	d := outbound.NewDispatcher(outbound.Options{Store: store, Render: api.Renderer(store, o.Now, o.BillingGrace), Sender: sender, SendTimeout: timeout,
		Owner: o.Owner, Now: o.Now, Jitter: o.Jitter, Log: o.Log, Observer: o.Observer, Lease: o.Lease})
	svc.OnApplied(d.Notify)
	return d, &api.Outbound{Store: store.Outbound(), Sender: sender, AllowPrivate: o.AllowPrivate, AllowHTTP: o.AllowHTTP, Notify: d.EndpointsChanged,
		RecordNow: d.RecordNow}
}
