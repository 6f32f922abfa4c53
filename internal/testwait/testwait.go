// Package testwait polls a condition in unit tests until it holds.
package testwait

import (
	"testing"
	"time"
)

// Timeout bounds Until's wait, and the unit tests' other waits for
// something that must happen: generous, as make test runs the unit tests
// beside cluster tests on two cores, where a fixture's goroutine can wait
// seconds for one. A passing test never waits it out.
const Timeout = 30 * time.Second

// Until polls cond every 5 ms until it holds, failing t after Timeout; what
// says what it waited for.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(Timeout); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting: %s", Timeout, what)
		}
	}
}
