package models

import "time"

// Backup is a copy of the embedded store that usersync made while it ran.
type Backup struct {
	Path  string // the file, in the data dir's backups directory
	Bytes int64
	At    time.Time // the time in its name
}
