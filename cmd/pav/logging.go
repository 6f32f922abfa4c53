package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
)

// addLoggingFlags adds the logging flags of Kubernetes' components
// (component-base/logs: --logging-format, -v, --vmodule,
// --log-flush-frequency) to fs, and klog's other flags, which Kubernetes
// dropped, hidden and deprecated so that existing command lines still start.
// Flags are spelt with dashes; the underscore spellings of older releases
// (--log_file, --log_flush_frequency) still parse (main normalizes them).
func addLoggingFlags(fs *pflag.FlagSet) *logsapi.LoggingConfiguration {
	c := logsapi.NewLoggingConfiguration()
	logsapi.AddFlags(c, fs)
	// Alpha options that need a feature gate PaV does not offer.
	for _, name := range []string{"log-text-split-stream", "log-text-info-buffer-size", "log-json-split-stream", "log-json-info-buffer-size"} {
		_ = fs.MarkHidden(name)
	}
	var klogFlags goflag.FlagSet
	klog.InitFlags(&klogFlags)
	klogFlags.VisitAll(func(f *goflag.Flag) {
		pf := pflag.PFlagFromGoFlag(f)
		if fs.Lookup(pf.Name) != nil {
			return
		}
		pf.Hidden = true
		pf.Deprecated = "klog's own flags are going away, as in Kubernetes' components: logs go to stderr, use --logging-format"
		fs.AddFlag(pf)
	})
	return c
}

// applyLogging configures klog, the logger of PaV and client-go, as the flags say.
func applyLogging(c *logsapi.LoggingConfiguration) error {
	if err := logsapi.ValidateAndApply(c, nil); err != nil {
		return fmt.Errorf("logging flags: %w", err)
	}
	return nil
}

// processCommand is the command of a long-running PaV process (controller,
// node): the logging flags, applied before run, which runs until SIGINT or
// SIGTERM cancels its context.
func processCommand(use, short string, run func(context.Context) error) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	logging := addLoggingFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyLogging(logging); err != nil {
			return err
		}
		ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer cancel()
		return run(ctx)
	}
	return cmd
}
