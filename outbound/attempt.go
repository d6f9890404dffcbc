package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// drop ends a delivery of an object usersync no longer has (erased):
// dropped.
func (d *Dispatcher) drop(dl models.Delivery) {
	r := dl
	r.Status = models.DeliveryDropped
	d.settle(models.Settlement{Sent: dl, Result: r})
}

// payload is a delivery's body: Standard Webhooks' type, timestamp and
// data, and what changed and where the change came from.
type payload struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
	Changed   []string        `json:"changed"`
	Origin    string          `json:"origin"`
}

// send sends one delivery and records what became of it.
func (d *Dispatcher) send(ctx context.Context, ep models.Endpoint, dl models.Delivery) {
	now := d.o.Now().UTC()
	data, deleted, err := d.o.Render(ctx, dl.Kind, dl.ObjectID)
	var wait *WaitError
	switch {
	case errors.Is(err, models.ErrNotFound):
		d.drop(dl) // erased meanwhile
		return
	case errors.As(err, &wait):
		r := dl
		r.NextAt = wait.Until
		d.settle(models.Settlement{Sent: dl, Result: r})
		return
	}
	var fields map[string]string
	if err == nil {
		fields, err = Fingerprint(dl.Key(), data)
	}
	if err != nil {
		d.failed(ctx, ep, dl, Result{Verdict: Retry, Err: "render: " + err.Error()}, "", now)
		return
	}
	change := dl.Change
	switch {
	case deleted:
		change = models.EventDeleted
	case change == models.EventDeleted:
		change = models.EventUpdated
	case change == models.EventCreated && dl.Fields != nil:
		change = models.EventUpdated
	}
	typ := models.OutboundType(dl.Kind, change)
	changed := Changed(dl.Fields, fields)
	if (dl.Fields != nil && len(changed) == 0) || !models.MatchesType(ep.EventTypes, typ) {
		// Nothing the app has not seen, or a state it does not want: done.
		// The state it has keeps the webhook-id it came with (a replay
		// sends it again under that id).
		r := dl
		r.Status, r.Attempts = models.DeliveryDelivered, 0
		if dl.DeliveredMsg != "" {
			r.MessageID = dl.DeliveredMsg
		} else {
			r.DeliveredMsg = dl.MessageID
		}
		d.settle(models.Settlement{Sent: dl, Result: r})
		return
	}
	sent := data
	if dl.Kind == models.KindPlan {
		if data, err = withPrevious(data, dl.Sent); err != nil {
			d.failed(ctx, ep, dl, Result{Verdict: Retry, Err: "render: " + err.Error()}, typ, now)
			return
		}
	}
	body, err := json.Marshal(payload{Type: typ, Timestamp: now, Data: data, Changed: changed, Origin: dl.Origin})
	if err != nil {
		d.failed(ctx, ep, dl, Result{Verdict: Retry, Err: "render: " + err.Error()}, typ, now)
		return
	}
	res := d.o.Sender.Send(ctx, TargetOf(ep, now), Message{ID: dl.MessageID, Timestamp: now, Body: body})
	if d.o.Observer != nil {
		d.o.Observer.Attempted(ep.ID, res.Verdict, res.Latency)
	}
	d.mu.Lock()
	if res.Status == 0 {
		d.pool.silent[ep.ID] = true
	} else {
		delete(d.pool.silent, ep.ID)
	}
	d.mu.Unlock()
	if res.Verdict != Delivered {
		d.failed(ctx, ep, dl, res, typ, now)
		return
	}
	r := dl
	r.Status, r.Attempts, r.Fields = models.DeliveryDelivered, dl.Attempts+1, fields // the attempts it took
	if dl.Kind == models.KindPlan {
		r.Sent = sent
	}
	r.LastStatus, r.LastError, r.LastAt, r.DeliveredAt, r.DeliveredMsg = res.Status, "", &now, &now, dl.MessageID
	d.settle(models.Settlement{Sent: dl, Result: r, Attempt: attemptOf(dl, typ, now, res)})
	if ep.FailingSince != nil {
		d.health(ctx, ep.ID, func(ctx context.Context, o repository.Outbound) error { return o.EndpointAnswered(ctx, ep.ID) })
	}
}

func attemptOf(dl models.Delivery, typ string, at time.Time, res Result) models.Attempt {
	return models.Attempt{EndpointID: dl.EndpointID, MessageID: dl.MessageID, Type: typ, ObjectID: dl.ObjectID, At: at,
		Status: res.Status, Latency: res.Latency, Error: res.Err, Delivered: res.Verdict == Delivered}
}

// failed records a failed attempt: the next on the schedule (or none:
// failed), and the endpoint's health: 410 disables it, and so does
// failing every delivery for models.MaxFailingFor.
func (d *Dispatcher) failed(ctx context.Context, ep models.Endpoint, dl models.Delivery, res Result, typ string, now time.Time) {
	r := dl
	r.LastStatus, r.LastError, r.LastAt = res.Status, res.Err, &now
	r.Attempts++
	if at, ok := NextAttempt(r.Attempts, now, res.RetryAfter, d.o.Jitter()); ok {
		r.NextAt = at
	} else {
		r.Status = models.DeliveryFailed
	}
	if res.Verdict == Gone {
		r.Status = models.DeliveryDropped
	}
	d.settle(models.Settlement{Sent: dl, Result: r, Attempt: attemptOf(dl, typ, now, res)})
	switch {
	case res.Verdict == Gone:
		d.disable(ctx, ep.ID, models.DisabledGone, time.Time{}, now)
	case ep.FailingSince == nil:
		d.health(ctx, ep.ID, func(ctx context.Context, o repository.Outbound) error { return o.EndpointFailing(ctx, ep.ID, now) })
	case now.Sub(*ep.FailingSince) >= models.MaxFailingFor:
		d.disable(ctx, ep.ID, models.DisabledFailing, now.Add(-models.MaxFailingFor), now)
	}
}

// disable disables an endpoint for reason; failingBefore as the store's
// DisableEndpoint (an admin who enabled it again meanwhile wins).
func (d *Dispatcher) disable(ctx context.Context, id, reason string, failingBefore, now time.Time) {
	var done bool
	d.health(ctx, id, func(ctx context.Context, o repository.Outbound) (err error) {
		done, err = o.DisableEndpoint(ctx, id, reason, failingBefore, now)
		return err
	})
	if done {
		d.o.Log.LogAttrs(ctx, slog.LevelError, "outbound webhooks: endpoint disabled",
			slog.String("endpoint", id), slog.String("reason", reason))
		if d.o.Observer != nil {
			d.o.Observer.Disabled(id, reason)
		}
	}
}

// health records the health of endpoint id with write, one conditional
// write of the store's that changes only the fields of its health (never
// an admin's settings, never an endpoint that is gone), even when ctx has
// ended. The next refresh of the endpoints reads it.
func (d *Dispatcher) health(ctx context.Context, id string, write func(context.Context, repository.Outbound) error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := write(ctx, d.o.Store.Outbound()); err != nil {
		d.o.Log.LogAttrs(ctx, slog.LevelWarn, "outbound webhooks: endpoint's health not recorded",
			slog.String("endpoint", id), slog.String("err", err.Error()))
	}
}

// withPrevious is a plan's data with "previous": the plan of the data the
// endpoint last received (sent), null when it received none.
func withPrevious(data, sent json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	m["previous"] = json.RawMessage("null")
	if sent != nil {
		var before map[string]json.RawMessage
		if err := json.Unmarshal(sent, &before); err == nil && before["plan"] != nil {
			m["previous"] = before["plan"]
		}
	}
	return json.Marshal(m)
}
