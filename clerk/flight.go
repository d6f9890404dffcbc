package clerk

import (
	"context"
	"encoding/json"
	stdsync "sync"
)

// Flight makes concurrent reads of one object share one request: the first
// caller starts the read, the others wait for its answer. The read runs
// for as long as one caller still waits for it: when the last one leaves
// (its context ends), the read is cancelled, so that callers who gave up
// leave no work behind. Its zero value is ready.
//
// golang.org/x/sync/singleflight shares a call the same way but cannot
// cancel it once every caller has left, which is the point here.
type Flight struct {
	mu    stdsync.Mutex
	calls map[string]*call

	joined func() // tests: called when a caller joins a read under way
}

type call struct {
	done    chan struct{}
	user    json.RawMessage
	err     error
	waiters int
	cancel  context.CancelFunc
}

// Do returns read(rctx) for key, calling read once for all the callers
// that ask for key while it runs. rctx ends when every caller has stopped
// waiting; a caller whose ctx ends stops waiting at once.
func (f *Flight) Do(ctx context.Context, key string, read func(rctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]*call{}
	}
	c, ok := f.calls[key]
	if ok {
		c.waiters++
		if f.joined != nil {
			f.joined()
		}
	} else {
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &call{done: make(chan struct{}), waiters: 1, cancel: cancel}
		f.calls[key] = c
		go func() {
			c.user, c.err = read(rctx)
			cancel()
			f.forget(key, c)
			close(c.done)
		}()
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.user, c.err
	case <-ctx.Done():
		f.mu.Lock()
		c.waiters--
		abandoned := c.waiters == 0
		f.mu.Unlock()
		if abandoned {
			c.cancel()
			f.forget(key, c) // a caller who comes now starts afresh
		}
		return nil, ctx.Err()
	}
}

// forget removes c, if it is still the call for key.
func (f *Flight) forget(key string, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[key] == c {
		delete(f.calls, key)
	}
}
