package mongo

// SetWalkBatchForTest makes WalkActive read n users at a time, so that
// tests cross batches with few users; it returns the undo.
func SetWalkBatchForTest(n int) (restore func()) {
	old := walkBatch
	walkBatch = n
	return func() { walkBatch = old }
}
