package nodeagent

import "sync"

// stagingLocks serializes Publish, Unpublish and the abandoned sweep per
// staging, and only per staging: a publish that waits minutes for its
// staging pod must hold up no other. (k8s.io/utils/keymutex hashes keys onto
// a fixed set of mutexes, one per CPU by default, so unrelated stagings
// would wait for each other.)
type stagingLocks struct {
	mu    sync.Mutex
	locks map[string]*stagingLock
}

type stagingLock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes with the last one
}

// lock blocks until the staging is free and returns the function that frees it.
func (l *stagingLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*stagingLock{}
	}
	k := l.locks[id]
	if k == nil {
		k = &stagingLock{}
		l.locks[id] = k
	}
	k.users++
	l.mu.Unlock()

	k.Lock()
	return func() {
		k.Unlock()
		l.mu.Lock()
		if k.users--; k.users == 0 {
			delete(l.locks, id)
		}
		l.mu.Unlock()
	}
}
