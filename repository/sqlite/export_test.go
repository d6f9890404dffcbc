package sqlite

// SetBackupStep makes a backup's steps n pages long, for a test, and
// returns what puts the length back.
func SetBackupStep(n int32) func() {
	old := backupStep
	backupStep = n
	return func() { backupStep = old }
}
