package clerk

import (
	"context"
	"encoding/json"
	stdsync "sync"
)

// Flight makes concurrent reads of one user share one request: the first
// caller reads, the others wait for its answer. Its zero value is ready.
type Flight struct {
	mu    stdsync.Mutex
	calls map[string]*call

	joined func() // tests: called when a caller joins a read under way
}

type call struct {
	done chan struct{}
	user json.RawMessage
	err  error
}

// Do returns read(key), calling it once for all the callers that ask for
// key while it runs. A caller whose ctx ends stops waiting; the read goes
// on for the others.
func (f *Flight) Do(ctx context.Context, key string, read func() (json.RawMessage, error)) (json.RawMessage, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]*call{}
	}
	c, ok := f.calls[key]
	if ok && f.joined != nil {
		f.joined()
	}
	if !ok {
		c = &call{done: make(chan struct{})}
		f.calls[key] = c
		go func() {
			c.user, c.err = read()
			f.mu.Lock()
			delete(f.calls, key)
			f.mu.Unlock()
			close(c.done)
		}()
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.user, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
