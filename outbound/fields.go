package outbound

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// unwatched are the fields of a REST shape whose change alone is not a
// change an app is told of: usersync's and Clerk's times of the write,
// the event that made it, and a user's last activity (a session event's:
// a sign-in sends no user.updated).
var unwatched = map[string]bool{"updatedAt": true, "sourceUpdatedAt": true, "lastEventId": true, "lastActiveAt": true}

// Fingerprint is what a delivery keeps of a state it sent: each top-level
// field of data (a JSON object) but the unwatched, with a hash of its
// value keyed by the delivery's key, so the next delivery can name the
// fields changed since without a copy of the values.
func Fingerprint(key string, data json.RawMessage) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("fingerprint: the state is not a JSON object: %w", err)
	}
	out := make(map[string]string, len(m))
	for name, v := range m {
		if unwatched[name] {
			continue
		}
		h := sha256.New()
		h.Write([]byte(key))
		h.Write([]byte{0})
		h.Write([]byte(name))
		h.Write([]byte{0})
		h.Write(v) // as rendered: the same state renders the same bytes
		out[name] = base64.RawStdEncoding.EncodeToString(h.Sum(nil)[:12])
	}
	return out, nil
}

// Changed names the fields whose fingerprint differs between before (nil:
// nothing was received, so every field is new) and after, sorted.
func Changed(before, after map[string]string) []string {
	changed := []string{}
	for name, h := range after {
		if before == nil || before[name] != h {
			changed = append(changed, name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok && !slices.Contains(changed, name) {
			changed = append(changed, name)
		}
	}
	sort.Strings(changed)
	return changed
}
