package mongo

import (
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
)

// codeOutOfDiskSpace is MongoDB's OutOfDiskSpace error code.
const codeOutOfDiskSpace = 14031

// storageFullMessages are how the engines word a write refused for lack of
// space: the operating system's ENOSPC, as MongoDB's storage engine and
// PostgreSQL under the DocumentDB engines ("could not extend file …: No
// space left on device") report it.
var storageFullMessages = []string{"no space left on device"}

// isStorageFull reports whether err says that the database has no space
// left to write.
func isStorageFull(err error) bool {
	var se mongo.ServerError
	if errors.As(err, &se) && se.HasErrorCode(codeOutOfDiskSpace) {
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range storageFullMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// storageFull wraps err as an availability failure (a retry may succeed once
// space is freed) that says why.
func storageFull(err error) error {
	return fmt.Errorf("%w: %w: %w", models.ErrUnavailable, models.ErrStorageFull, err)
}
