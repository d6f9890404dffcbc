package outbound

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// A resync sends an endpoint the current state of every object it wants:
// for a new endpoint, or after any outage. The dispatcher walks the store
// kind by kind (models.ResyncKinds), a page a round per endpoint, and
// queues each object as a replay does (models.Delivery.Resend: sent
// whole, every field changed, with its webhook-id when the endpoint has
// it), then records the walk's place on the endpoint, so that a restart
// or another instance taking the lease goes on from there. Deleted
// objects are sent only when the resync asks for them.

// resyncPage is how many objects one round queues for one endpoint.
const resyncPage = 256

// farFuture bounds the change feeds a resync walks: every change.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// resyncWalk reads a page of up to n objects of one kind after the cursor
// after, as the changes to queue; next is "" once the kind is done.
type resyncWalk func(ctx context.Context, s repository.Store, after string, n int) (ps []models.Pending, next string, err error)

// resyncWalks are the walks of each kind of models.ResyncKinds.
var resyncWalks = map[models.Kind]resyncWalk{
	models.KindUser: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Users().List(ctx, models.UserFilter{IncludeDeleted: true, After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Users))
		for i, u := range page.Users {
			ps[i] = resynced(models.KindUser, u.UserID, u.UserID, u.Version())
		}
		return ps, page.NextCursor, nil
	},
	models.KindOrganization: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Organizations().List(ctx, models.OrganizationFilter{IncludeDeleted: true, After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Organizations))
		for i, o := range page.Organizations {
			ps[i] = resynced(models.KindOrganization, o.OrgID, "", o.Version())
		}
		return ps, page.NextCursor, nil
	},
	models.KindMembership: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Memberships().Changes(ctx, models.ChangeFilter{Until: farFuture, After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Memberships))
		for i, m := range page.Memberships {
			ps[i] = resynced(models.KindMembership, m.MembershipID, m.UserID, m.Version())
		}
		return ps, feedNext(len(ps), n, page.NextCursor), nil
	},
	models.KindInvitation: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Invitations().Changes(ctx, models.ChangeFilter{Until: farFuture, After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Invitations))
		for i, inv := range page.Invitations {
			ps[i] = resynced(models.KindInvitation, inv.InvitationID, inv.UserID, inv.Version())
		}
		return ps, feedNext(len(ps), n, page.NextCursor), nil
	},
	models.KindSubscription: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Billing().Subscriptions(ctx, models.SubscriptionFilter{After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Subscriptions))
		for i, sub := range page.Subscriptions {
			ps[i] = resynced(models.KindSubscription, sub.SubscriptionID, sub.Payer.UserID(), sub.Version())
		}
		return ps, page.NextCursor, nil
	},
	models.KindPaymentAttempt: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Billing().PaymentAttempts(ctx, models.PaymentAttemptFilter{After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Attempts))
		for i, a := range page.Attempts {
			ps[i] = resynced(models.KindPaymentAttempt, a.AttemptID, a.Payer.UserID(), a.Version())
		}
		return ps, page.NextCursor, nil
	},
	// The items are walked through the payers' plans: each payer's items
	// (models.MaxPayerItems at most).
	models.KindSubscriptionItem: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Billing().PlanChanges(ctx, models.ChangeFilter{Until: farFuture, After: after, Limit: max(n/8, 1)})
		if err != nil {
			return nil, "", err
		}
		var ps []models.Pending
		for _, p := range page.Plans {
			items, err := s.Billing().Items(ctx, p.Payer)
			if err != nil {
				return nil, "", err
			}
			for _, it := range items {
				ps = append(ps, resynced(models.KindSubscriptionItem, it.ItemID, it.Payer.UserID(), it.Version()))
			}
		}
		return ps, feedNext(len(page.Plans), max(n/8, 1), page.NextCursor), nil
	},
	models.KindPlan: func(ctx context.Context, s repository.Store, after string, n int) ([]models.Pending, string, error) {
		page, err := s.Billing().PlanChanges(ctx, models.ChangeFilter{Until: farFuture, After: after, Limit: n})
		if err != nil {
			return nil, "", err
		}
		ps := make([]models.Pending, len(page.Plans))
		for i, p := range page.Plans {
			ps[i] = resynced(models.KindPlan, p.Payer.ID, p.Payer.UserID(), models.Version{SourceTime: p.UpdatedAt})
		}
		return ps, feedNext(len(ps), n, page.NextCursor), nil
	},
}

// feedNext is a change feed's cursor for the next page of a walk, or ""
// once a page came back short (the feed's cursor is always set).
func feedNext(got, n int, next string) string {
	if got < n {
		return ""
	}
	return next
}

// resynced is the change a resync queues for an object at version v:
// its state as it is now, or its deletion.
func resynced(k models.Kind, id, userID string, v models.Version) models.Pending {
	c := models.EventUpdated
	if v.Deleted {
		c = models.EventDeleted
	}
	return models.Pending{Kind: k, ObjectID: id, UserID: userID, Version: v, Change: c, Origin: models.OriginResync,
		At: v.SourceTime}
}

// wantsKind reports whether endpoint e wants some type of kind k.
func wantsKind(e models.Endpoint, k models.Kind) bool {
	return slices.ContainsFunc([]models.EventType{models.EventCreated, models.EventUpdated, models.EventDeleted},
		func(c models.EventType) bool { return models.MatchesType(e.EventTypes, models.OutboundType(k, c)) })
}

// resync takes each endpoint's resync under way one page further.
func (d *Dispatcher) resync(ctx context.Context) error {
	d.mu.Lock()
	var eps []models.Endpoint
	for _, e := range d.endpoints {
		if e.Resync.Running() {
			eps = append(eps, e)
		}
	}
	d.mu.Unlock()
	for _, e := range eps {
		if err := d.resyncPage(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// resyncPage queues one page of e's resync and records where it got.
func (d *Dispatcher) resyncPage(ctx context.Context, e models.Endpoint) error {
	r := *e.Resync
	i := slices.Index(models.ResyncKinds, r.Kind)
	for i >= 0 && i < len(models.ResyncKinds) && !wantsKind(e, models.ResyncKinds[i]) {
		i, r.After = i+1, "" // a kind it does not want
	}
	now := d.o.Now().UTC()
	if i < 0 || i == len(models.ResyncKinds) {
		r.Kind, r.After, r.DoneAt = "", "", &now
	} else {
		r.Kind = models.ResyncKinds[i]
		ps, next, err := resyncWalks[r.Kind](ctx, d.o.Store, r.After, resyncPage)
		if err != nil {
			return err
		}
		fs := make([]models.Fanout, 0, len(ps))
		for _, p := range ps {
			if p.Version.Deleted && !r.IncludeDeleted {
				continue
			}
			fs = append(fs, models.Fanout{Pending: p, Endpoints: []string{e.ID}, Forced: true})
		}
		if err := d.o.Store.Outbound().Fanout(ctx, fs, nil, now); err != nil {
			return err
		}
		r.Queued += int64(len(fs))
		if r.After = next; next == "" {
			if i+1 < len(models.ResyncKinds) {
				r.Kind = models.ResyncKinds[i+1]
			} else {
				r.Kind, r.DoneAt = "", &now
			}
		}
	}
	ok, err := d.o.Store.Outbound().SaveResync(ctx, e.ID, r)
	if err != nil {
		return err
	}
	if ok && r.DoneAt != nil {
		d.o.Log.LogAttrs(ctx, slog.LevelInfo, "outbound webhooks: endpoint resynced", slog.String("endpoint", e.ID),
			slog.Int64("queued", r.Queued))
	}
	d.mu.Lock()
	if cur, found := d.endpoints[e.ID]; found && ok {
		cur.Resync = &r
		d.endpoints[e.ID] = cur
	}
	d.mu.Unlock()
	if r.DoneAt == nil {
		d.Notify() // the next page, and the sends it queued
	}
	return nil
}
