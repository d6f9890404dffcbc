package mongo

import (
	"context"
	"errors"
	"time"

	"github.com/usersync/usersync/models"
	"github.com/usersync/usersync/repository"
)

// Outbound is not written yet for MongoDB.
type Outbound struct{}

var errNoOutbound = errors.New("outbound webhooks are not kept by the MongoDB store yet")

// Outbound returns the outbound collections.
func (s *Store) Outbound() repository.Outbound { return Outbound{} }

func (Outbound) SetRecording(bool)                                    {}
func (Outbound) Endpoints(context.Context) ([]models.Endpoint, error) { return nil, errNoOutbound }
func (Outbound) Endpoint(context.Context, string) (models.Endpoint, error) {
	return models.Endpoint{}, errNoOutbound
}
func (Outbound) PutEndpoint(context.Context, models.Endpoint) error     { return errNoOutbound }
func (Outbound) DeleteEndpoint(context.Context, string) error           { return errNoOutbound }
func (Outbound) Outbox(context.Context, int) ([]models.Outboxed, error) { return nil, errNoOutbound }
func (Outbound) Fanout(context.Context, []models.Fanout, []string, time.Time) error {
	return errNoOutbound
}
func (Outbound) Due(context.Context, time.Time, int) ([]models.Delivery, error) {
	return nil, errNoOutbound
}
func (Outbound) Settle(context.Context, models.Delivery, models.Delivery, models.Attempt) error {
	return errNoOutbound
}
func (Outbound) Delivery(context.Context, string, models.Kind, string) (models.Delivery, error) {
	return models.Delivery{}, errNoOutbound
}
func (Outbound) Deliveries(context.Context, models.DeliveryFilter) ([]models.Delivery, string, error) {
	return nil, "", errNoOutbound
}
func (Outbound) Requeue(context.Context, models.Requeue, time.Time) (int, error) {
	return 0, errNoOutbound
}
func (Outbound) Backlog(context.Context) (map[string]models.Backlog, error) {
	return nil, errNoOutbound
}
func (Outbound) Attempts(context.Context, models.AttemptFilter) ([]models.Attempt, string, error) {
	return nil, "", errNoOutbound
}
func (Outbound) DeleteAttemptsBefore(context.Context, time.Time, int) (int, error) {
	return 0, errNoOutbound
}
