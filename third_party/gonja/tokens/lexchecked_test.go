package tokens_test

import (
	"errors"
	"testing"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// LexChecked shows every token to the check as it is lexed, and stops at
// the check's first error without lexing further.
func TestLexCheckedStopsAtTheFirstError(t *testing.T) {
	var seen []string
	tooMany := errors.New("too many")
	stream, err := tokens.LexChecked("{{ a + b }}{{ c }}", config.New(), func(tok *tokens.Token) error {
		if tok.Type == tokens.Whitespace {
			return nil
		}
		seen = append(seen, tok.Val)
		if tok.Val == "b" {
			return tooMany
		}
		return nil
	})
	if stream != nil || !errors.Is(err, tooMany) {
		t.Fatalf("LexChecked = %v, %v; want the check's error", stream, err)
	}
	if got := len(seen); got != 4 {
		t.Errorf("check saw %q, want {{ a + b and nothing after", seen)
	}

	seen = nil
	stream, err = tokens.LexChecked("{{ a }}", config.New(), func(tok *tokens.Token) error {
		seen = append(seen, tok.Val)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var streamed []string
	for ; !stream.End(); stream.Next() {
		streamed = append(streamed, stream.Current().Val)
	}
	if len(streamed) != 3 || len(seen) < len(streamed) {
		t.Errorf("stream %q, check saw %q", streamed, seen)
	}
}
