package repotest

import stdsync "sync"

// FrozenDisk is a write gate for the embedded store (sqlite.Options's
// WriteGate: pass Gate) that holds the store's writer while frozen, as a
// filesystem that does not answer would. Tests freeze a disk this way
// instead of freezing a real filesystem, which needs root.
type FrozenDisk struct {
	mu     stdsync.Mutex
	thawed chan struct{} // nil while not frozen
}

// Gate waits while the disk is frozen.
func (d *FrozenDisk) Gate() {
	d.mu.Lock()
	thawed := d.thawed
	d.mu.Unlock()
	if thawed != nil {
		<-thawed
	}
}

// Freeze holds every write that reaches Gate from now until Thaw.
func (d *FrozenDisk) Freeze() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.thawed = make(chan struct{})
}

// Thaw lets the held writes go on.
func (d *FrozenDisk) Thaw() {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.thawed)
	d.thawed = nil
}
