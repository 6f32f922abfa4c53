//go:build soak

package soak

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// PaV's install (deployment.yaml).
const (
	pavNamespace   = framework.PavNamespace
	leaderLease    = "pav-controller"
	nodePluginPods = framework.NodePluginPods
)

// A cluster fault: inject returns false if there was nothing to hit (e.g. no
// staging pod at that moment).
type clusterFault struct {
	name   string
	inject func(s *soak, ctx context.Context, rng *rand.Rand) (bool, error)
}

var clusterFaults = []clusterFault{
	{"kill -9 the leading controller", (*soak).killLeader},
	{"kill -9 the node plugin", (*soak).killNodePlugin},
	{"delete a staging pod", (*soak).deleteStagingPod},
	{"kill -9 a long-running staging pod's processes", (*soak).killStagingProcesses},
	{"restart kube-apiserver (kill -9)", (*soak).restartAPIServer},
	{"restart the kubelet (kill -9)", (*soak).restartKubelet},
}

// injectFaults injects cluster faults, one at a time, until ctx ends: after a
// pause of FaultEvery/2 to 3·FaultEvery/2, the fault the seed picks next.
func (s *soak) injectFaults(ctx context.Context) {
	rng := rngFor(s.cfg.Seed, 0)
	for {
		pause := s.cfg.FaultEvery/2 + time.Duration(rng.Float64()*float64(s.cfg.FaultEvery))
		fault := clusterFaults[rng.IntN(len(clusterFaults))]
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		// A fault runs to its end even when the lifecycles are done: a
		// half-restarted API server would fail the audit, not the fault.
		hit, err := fault.inject(s, context.Background(), rng)
		switch {
		case err != nil:
			s.mu.Lock()
			s.faultErrors = append(s.faultErrors, fmt.Sprintf("%s: %v", fault.name, err))
			s.mu.Unlock()
			s.t.Logf("fault %q: %v", fault.name, err)
		case hit:
			s.count(fault.name)
			s.t.Logf("fault: %s", fault.name)
		}
	}
}

func (s *soak) killLeader(ctx context.Context, _ *rand.Rand) (bool, error) {
	lease, err := s.f.Client.CoordinationV1().Leases(pavNamespace).Get(ctx, leaderLease, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		return false, nil // no leader right now (e.g. the last one was just killed)
	}
	name := *lease.Spec.HolderIdentity
	if i := strings.LastIndex(name, "_"); i > 0 {
		name = name[:i]
	}
	uid, err := s.podUID(ctx, pavNamespace, name)
	if err != nil || uid == "" {
		return false, err
	}
	return framework.KillPod(uid)
}

func (s *soak) killNodePlugin(ctx context.Context, _ *rand.Rand) (bool, error) {
	pods, err := s.f.Client.CoreV1().Pods(pavNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: nodePluginPods, FieldSelector: "spec.nodeName=" + s.node})
	if err != nil || len(pods.Items) == 0 {
		return false, err
	}
	return framework.KillPod(pods.Items[0].UID)
}

// soakPods lists the running PaV pods of a phase (and, if given, of a
// provisioner) in the soak's namespace, in a stable order for the seed.
func (s *soak) soakPods(ctx context.Context, phase protocol.Phase, provisioner string) ([]corev1.Pod, error) {
	set := labels.Set{protocol.LabelPhase: string(phase)}
	if provisioner != "" {
		set[protocol.LabelProvisioner] = provisioner
	}
	pods, err := s.f.Client.CoreV1().Pods(s.f.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: set.AsSelector().String(), FieldSelector: "status.phase=Running"})
	if err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

func (s *soak) deleteStagingPod(ctx context.Context, rng *rand.Rand) (bool, error) {
	pods, err := s.soakPods(ctx, protocol.PhaseStaging, "")
	if err != nil || len(pods) == 0 {
		return false, err
	}
	p := pods[rng.IntN(len(pods))]
	err = s.f.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	return err == nil, ignoreNotFound(err)
}

func (s *soak) killStagingProcesses(ctx context.Context, rng *rand.Rand) (bool, error) {
	var long []corev1.Pod
	for _, sh := range shapes {
		if sh.LongRunning {
			pods, err := s.soakPods(ctx, protocol.PhaseStaging, sh.Name)
			if err != nil {
				return false, err
			}
			long = append(long, pods...)
		}
	}
	if len(long) == 0 {
		return false, nil
	}
	return framework.KillPod(long[rng.IntN(len(long))].UID)
}

func (s *soak) restartAPIServer(ctx context.Context, _ *rand.Rand) (bool, error) {
	return true, clusterScript(ctx, "restart.sh", "kube-apiserver")
}

func (s *soak) restartKubelet(ctx context.Context, _ *rand.Rand) (bool, error) {
	return true, clusterScript(ctx, "restart.sh", "kubelet", s.node)
}

// clusterScript runs one of hack/cluster's scripts.
func clusterScript(ctx context.Context, script string, args ...string) error {
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack/cluster", script), args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
