// Package testwait polls a condition in unit tests until it holds.
package testwait

import (
	"testing"
	"time"
)

// Timeout bounds Until's wait.
const Timeout = 10 * time.Second

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
