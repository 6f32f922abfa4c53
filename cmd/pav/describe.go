package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/albertofaria/pav/describe"
	"github.com/albertofaria/pav/kubeclient"
)

func init() { rootCmd.AddCommand(newDescribeCmd()) }

// kubectlPlugin is the name kubectl runs `kubectl pav ...` as.
const kubectlPlugin = "kubectl-pav"

// asKubectlPlugin makes the usage lines say `kubectl pav` when the binary
// runs under the plugin's name (installed or symlinked as kubectl-pav).
func asKubectlPlugin(root *cobra.Command, argv0 string) {
	if strings.TrimSuffix(filepath.Base(argv0), ".exe") == kubectlPlugin {
		if root.Annotations == nil {
			root.Annotations = map[string]string{}
		}
		root.Annotations[cobra.CommandDisplayNameAnnotation] = "kubectl pav"
	}
}

func newDescribeCmd() *cobra.Command {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	var namespace string
	client := func() (*kubeclient.Clientset, string, error) {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides)
		cfg, err := cc.ClientConfig()
		if err != nil {
			return nil, "", fmt.Errorf("kubernetes client configuration: %w", err)
		}
		cfg.UserAgent = "pav-describe/" + version
		ns := namespace
		if ns == "" {
			if ns, _, err = cc.Namespace(); err != nil {
				return nil, "", err
			}
		}
		c, err := kubeclient.NewForConfig(cfg)
		return c, ns, err
	}
	cmd := &cobra.Command{
		Use:   "describe (pvc NAME [-n NAMESPACE] | pavprovisioner NAME)",
		Short: "Show what PaV did and said about a claim or a PavProvisioner",
		Long: `describe pvc NAME: the claim's state and Events, its provisioner's
conditions, every pod PaV ran for it (phase, node, the /pav/error it wrote or
why it failed, the last lines of its log if you may read it), the pods using
the claim with the staging pod on each one's node, and the Events about the
claim, its PersistentVolume and PaV's pods (from PaV's controller, its node
plugins and kubelet), with the Warning Events of the pods using the claim
(kubelet's FailedMount, where a failed staging shows).

describe pavprovisioner NAME: its conditions, its volumes (PersistentVolumes
of its CSI driver), its stagings (staging pods) and recent failures.

Also runs as the kubectl plugin "kubectl pav" when installed (or symlinked)
as kubectl-pav on the PATH.`,
		Args:          cobra.ExactArgs(2),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := client()
			if err != nil {
				return err
			}
			switch strings.ToLower(args[0]) {
			case "pvc", "pvcs", "persistentvolumeclaim", "persistentvolumeclaims":
				return describe.Claim(cmd.Context(), c, ns, args[1], cmd.OutOrStdout())
			case "pavprovisioner", "pavprovisioners":
				return describe.Provisioner(cmd.Context(), c, args[1], cmd.OutOrStdout())
			}
			return fmt.Errorf("cannot describe %q: use pvc or pavprovisioner", args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "the claim's namespace (default: the kubeconfig context's)")
	f.StringVar(&loading.ExplicitPath, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&overrides.CurrentContext, "context", "", "kubeconfig context to use")
	return cmd
}
