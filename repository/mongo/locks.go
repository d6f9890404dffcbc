package mongo

import (
	"hash/fnv"
	stdsync "sync"
)

// keyLocks serialises the writes to one key within this process.
//
// The embedded engine runs an update as a read, a check of the filter and a
// rewrite of the whole document, and not atomically: two conditional
// updates of one document can both pass their check, and the later write
// wins even when it carries the older state (or revives a deleted user).
// MongoDB applies each update to a document atomically. One process owns an
// embedded engine (its data dir is locked), so a lock in the process makes
// each conditional write atomic there too.
type keyLocks [64]stdsync.Mutex

// lock locks key's stripe and returns the unlock.
func (k *keyLocks) lock(key string) (unlock func()) {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	mu := &k[h.Sum32()%uint32(len(k))]
	mu.Lock()
	return mu.Unlock
}
