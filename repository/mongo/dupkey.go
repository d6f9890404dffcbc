package mongo

import (
	"errors"
	"regexp"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/usersync/usersync/models"
)

// conflictError is a write a unique index refused, as translate reports
// it. The driver's error stays reachable (errors.As, Unwrap) for whoever
// needs its details, but never through Error(): the server's message
// quotes the duplicate value (MongoDB: `dup key: { email: "…" }`), which
// is another user's email, and the text of an error ends up in HTTP
// bodies, in the event's stored error and in logs.
type conflictError struct {
	sentinel error  // models.ErrEmailTaken or models.ErrConflict
	index    string // the index that refused the write; "" when the server did not say
	driver   error
}

func (e *conflictError) Error() string {
	index := "a unique index"
	if e.index != "" {
		index = "unique index " + e.index
	}
	return e.sentinel.Error() + " (refused by " + index + ")"
}

// Unwrap gives errors.Is the sentinel and errors.As the driver's error.
func (e *conflictError) Unwrap() []error { return []error{e.sentinel, e.driver} }

// duplicateKeyCodes are the codes of a unique-index violation: 11000 (all
// engines), 11001 (an update, on old servers), 12582 (a capped
// collection), and 16460 with E11000 (an insert through an old mongos).
var duplicateKeyCodes = []int{11000, 11001, 12582}

// exclusionConstraint is how DocumentDB answers a findAndModify onto a
// value a unique index holds: code 1 (InternalError) and PostgreSQL's
// message, which names no index.
const exclusionConstraint = "conflicting key value violates exclusion constraint"

// uniqueViolation reports whether err is a write a unique index refused,
// and which index when the server said: from keyPattern in the write
// error or command answer when the server sends it, else from the
// message, in any engine's words (see indexFromMessage).
func uniqueViolation(err error) (index string, ok bool) {
	var we mongo.WriteException
	if errors.As(err, &we) {
		for _, e := range we.WriteErrors {
			if isDuplicateKeyCode(e.Code) {
				return indexOf(e.Raw, e.Message), true
			}
		}
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		for _, e := range bwe.WriteErrors {
			if isDuplicateKeyCode(e.Code) {
				return indexOf(e.Raw, e.Message), true
			}
		}
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		if isDuplicateKeyCode(int(ce.Code)) || ce.HasErrorCodeWithMessage(16460, "E11000") {
			return indexOf(ce.Raw, ce.Message), true
		}
	}
	var se mongo.ServerError
	if errors.As(err, &se) {
		switch {
		case se.HasErrorCodeWithMessage(1, exclusionConstraint):
			return "", true
		case mongo.IsDuplicateKeyError(err):
			return indexFromMessage(err.Error()), true
		}
	}
	return "", false
}

func isDuplicateKeyCode(code int) bool {
	for _, c := range duplicateKeyCodes {
		if code == c {
			return true
		}
	}
	return false
}

// indexOf names the index of a duplicate-key answer raw (a write error or
// a command's answer) with message msg.
func indexOf(raw bson.Raw, msg string) string {
	if kp, ok := raw.Lookup("keyPattern").DocumentOK(); ok {
		var keys bson.D
		if err := bson.Unmarshal(kp, &keys); err == nil && len(keys) > 0 {
			return indexName(keys)
		}
	}
	return indexFromMessage(msg)
}

// indexMessages find the index's name in a duplicate-key message:
//   - MongoDB: `E11000 duplicate key error collection: db.users index: email_1 dup key: { … }`;
//   - DocumentDB (FerretDB 2, Cosmos DB vCore): `Duplicate key violation on the requested collection: Index 'email_1'`.
var indexMessages = []*regexp.Regexp{
	regexp.MustCompile(`index: (\S+) dup key`),
	regexp.MustCompile(`Index '([^']+)'`),
}

func indexFromMessage(msg string) string {
	for _, re := range indexMessages {
		if m := re.FindStringSubmatch(msg); m != nil {
			return m[1]
		}
	}
	return ""
}

// errDuplicate: a unique index refused a write. It stays inside the
// store: every write that can meet one decides what it means (a retry
// recognised, a lost race to retry); models.ErrConflict is a state rule
// only.
var errDuplicate = errors.New("duplicate key")

// translateConflict is translate for a unique-index violation: the email
// index's is models.ErrEmailTaken, any other's errDuplicate.
func translateConflict(err error, index string) error {
	sentinel := errDuplicate
	if index == emailIndex {
		sentinel = models.ErrEmailTaken
	}
	return &conflictError{sentinel: sentinel, index: index, driver: err}
}

// conflictIndex returns the index that refused the write err reports
// (translated or not), or "" when the server did not name it.
func conflictIndex(err error) string {
	var ce *conflictError
	if errors.As(err, &ce) {
		return ce.index
	}
	index, _ := uniqueViolation(err)
	return index
}
