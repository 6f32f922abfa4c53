package controller

import (
	"sync"
	"time"
)

// backoff remembers, per work item, how many attempts failed in a row and when
// the next attempt may start. The workqueue's own rate limiter is not enough:
// one provisioning attempt spans many syncs (each pod event requeues the
// claim immediately), so a failure must hold back the whole next attempt, not
// just the next requeue. Kept in memory, like the external-provisioner: a
// restarted controller retries at once, which is harmless.
type backoff struct {
	start, max time.Duration
	now        func() time.Time

	mu    sync.Mutex
	items map[string]backoffEntry
}

type backoffEntry struct {
	failures  int
	notBefore time.Time
}

func newBackoff(start, max time.Duration) *backoff {
	return &backoff{start: start, max: max, now: time.Now, items: map[string]backoffEntry{}}
}

// delay is the wait after the n-th consecutive failure (n ≥ 1): start·2^(n-1), capped at max.
func (b *backoff) delay(n int) time.Duration {
	d := b.start
	for i := 1; i < n; i++ {
		d *= 2
		if d >= b.max {
			return b.max
		}
	}
	if d > b.max {
		return b.max
	}
	return d
}

// failed records a failure of key and returns how long to wait before retrying.
func (b *backoff) failed(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.items[key]
	e.failures++
	d := b.delay(e.failures)
	e.notBefore = b.now().Add(d)
	b.items[key] = e
	return d
}

// wait returns how long key must still wait before its next attempt (0: go).
func (b *backoff) wait(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.items[key]
	if !ok {
		return 0
	}
	if d := e.notBefore.Sub(b.now()); d > 0 {
		return d
	}
	return 0
}

// succeeded forgets key's failures.
func (b *backoff) succeeded(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.items, key)
}
