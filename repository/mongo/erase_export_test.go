package mongo

import (
	"context"
	"time"
)

// UnmarkErasureForTest is the last step of erasing a user's events.
func UnmarkErasureForTest(ctx context.Context, s *Store, userID string, deletedAt time.Time) error {
	return s.unmarkErasure(ctx, s.subjects()[0], userID, time.Now())
}
