package main

import (
	"testing"
	"time"

	"github.com/usersync/usersync/models"
)

// TestSeedTime_TheChangeFeedServesSeededUsersAtOnce: a run that seeds and
// then measures the change feed must time pages of users, not the empty
// pages of changes still settling.
func TestSeedTime_TheChangeFeedServesSeededUsersAtOnce(t *testing.T) {
	now := time.Now()
	if at := seedTime(now); !at.Before(now.Add(-models.ChangeSettle)) {
		t.Errorf("seeded at %v: the change feed serves nothing newer than %v", at, now.Add(-models.ChangeSettle))
	}
}
