package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// Run as kubectl-pav (the kubectl plugin's name), usage lines say "kubectl pav".
func TestKubectlPluginName(t *testing.T) {
	root := &cobra.Command{Use: "pav"}
	sub := &cobra.Command{Use: "describe", Run: func(*cobra.Command, []string) {}}
	root.AddCommand(sub)
	asKubectlPlugin(root, "/usr/local/bin/kubectl-pav")
	if got := sub.CommandPath(); got != "kubectl pav describe" {
		t.Errorf("command path %q, want kubectl pav describe", got)
	}
	root2 := &cobra.Command{Use: "pav"}
	asKubectlPlugin(root2, "/usr/local/bin/pav")
	if got := root2.CommandPath(); got != "pav" {
		t.Errorf("command path %q as pav", got)
	}
}
