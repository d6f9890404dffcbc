package mongo

import (
	"context"
	"time"
)

// UnmarkErasureForTest is the last step of erasing a user's events.
func UnmarkErasureForTest(ctx context.Context, s *Store, userID string, deletedAt time.Time) error {
	_, err := s.unmarkErasure(ctx, s.subjects()[0], eraseDoc{UserID: userID}, userID, time.Now())
	return err
}
