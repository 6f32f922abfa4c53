package nodeagent

import (
	"runtime"
	"testing"
)

func TestStagingLocks(t *testing.T) {
	var l stagingLocks
	unlockA := l.lock("a")
	// Another staging is free while "a" is held, whatever the keys hash to.
	for _, id := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		l.lock(id)()
	}
	second := make(chan func())
	go func() { second <- l.lock("a") }()
	for waiting := false; !waiting; runtime.Gosched() { // until it waits for "a"
		l.mu.Lock()
		waiting = l.locks["a"].users == 2
		l.mu.Unlock()
	}
	select {
	case <-second:
		t.Fatal("a second holder of staging a got the lock")
	default:
	}
	unlockA()
	(<-second)()
	if n := len(l.locks); n != 0 {
		t.Errorf("%d locks kept after every holder left", n)
	}
}
