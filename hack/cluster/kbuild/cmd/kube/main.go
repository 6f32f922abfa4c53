// Command kube is a multi-call Kubernetes binary: kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, kubectl and (with -tags
// kubeproxy) kube-proxy in one executable, chosen by basename(argv[0]) or by the
// first argument. One binary links the shared code once: 116 MB instead of
// 329 MB and about a minute faster to build cold than separate binaries.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	_ "time/tzdata" // for CronJob time zone support

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"

	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": kcm.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
	"kubectl":                 kubectl.NewDefaultKubectlCommand,
}

func main() {
	name := filepath.Base(os.Args[0])
	newCmd, ok := commands[name]
	if !ok && len(os.Args) > 1 {
		if newCmd, ok = commands[os.Args[1]]; ok {
			name = os.Args[1]
			os.Args = os.Args[1:]
		}
	}
	if !ok {
		var names []string
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: %s {%s} [flags] (or symlink as one of them)\n", filepath.Base(os.Args[0]), strings.Join(names, "|"))
		os.Exit(2)
	}
	if name == "kubectl" {
		// as cmd/kubectl does: errors are printed by kubectl's own handler
		if err := cli.RunNoErrOutput(newCmd()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	os.Exit(cli.Run(newCmd()))
}
