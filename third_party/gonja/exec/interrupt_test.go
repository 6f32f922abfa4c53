package exec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// Interrupt is asked before every statement, expression and filter call:
// its error ends the rendering, even where gonja ignores an expression's
// error (a list's items).
func TestInterruptEndsRendering(t *testing.T) {
	for name, src := range map[string]string{
		"statements":   strings.Repeat("{% set s = 'x' %}", 100),
		"filter chain": "{{ 'x'" + strings.Repeat("|upper", 100) + " }}",
		"expressions":  "{{ [" + strings.Repeat("'x', ", 100) + "] }}",
	} {
		t.Run(name, func(t *testing.T) {
			stop := errors.New("stop")
			calls := 0
			env := &exec.Environment{
				Context:           exec.EmptyContext(),
				Filters:           builtins.Filters,
				Tests:             builtins.Tests,
				ControlStructures: builtins.ControlStructures,
				Methods:           builtins.Methods,
				Interrupt: func() error {
					calls++
					if calls > 10 {
						return stop
					}
					return nil
				},
			}
			cfg := config.New()
			loader, err := loaders.NewMemoryLoader(map[string]string{"/t": src})
			if err != nil {
				t.Fatal(err)
			}
			tpl, err := exec.ParseTemplate("/t", cfg, loader, env, src, tokens.LexAll(src, cfg))
			if err != nil {
				t.Fatal(err)
			}
			out, err := tpl.ExecuteToString(exec.EmptyContext())
			if err == nil || !strings.HasSuffix(err.Error(), ": stop") {
				t.Errorf("rendering ended with %q, %v; want the interrupt's error", out, err)
			}
		})
	}
}
