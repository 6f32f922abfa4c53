package protocol

import (
	"strings"
	"testing"
)

// A handle is a path beneath its directory: slashes between names are fine,
// anything that steps out, back or aside is not.
func TestCheckHandle(t *testing.T) {
	for h, ok := range map[string]bool{
		"vol-1": true, "pool/vol-1": true, "a/b/c": true, "..a": true, "a..": true, "a.b": true,
		"": false, ".": false, "..": false, "/": false, "/data": false, "data/": false,
		"../../etc": false, "a/../b": false, "a/./b": false, "./a": false, "a//b": false,
		"a\nb": false, strings.Repeat("x", MaxHandleBytes+1): false,
	} {
		if err := CheckHandle(h); (err == nil) != ok {
			t.Errorf("CheckHandle(%q) = %v, want ok=%v", h, err, ok)
		}
	}
}
