package nodeagent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/albertofaria/pav/nodeagent/containerd"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/protocol"
)

// exitsFor returns Exits whose cache holds pods, and the pods it was told exited.
func exitsFor(t *testing.T, pods ...*corev1.Pod) (*Exits, *[]string) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, PodIndexers())
	for _, p := range pods {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	e := &Exits{pods: idx, codes: map[types.UID]map[string]uint32{}}
	var told []string
	e.OnExit(func(pod *corev1.Pod) { told = append(told, pod.Name) })
	return e, &told
}

func runToCompletionPod(uid types.UID, policy corev1.RestartPolicy, init []string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + string(uid), Namespace: "default", UID: uid,
			Labels: map[string]string{protocol.LabelPhase: string(protocol.PhaseCreation)}},
		Spec: corev1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n})
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n})
	}
	return pod
}

func TestExitsSucceeded(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := runToCompletionPod("s", corev1.RestartPolicyNever, []string{"side"}, "main")
	sidecar.Spec.InitContainers[0].RestartPolicy = &always
	tests := []struct {
		name  string
		pod   *corev1.Pod
		exits []containerd.Exit // of the pod's UID
		want  bool
	}{
		{"every container exited 0, init included", runToCompletionPod("a", corev1.RestartPolicyNever, []string{"init"}, "one", "two"),
			[]containerd.Exit{{Container: "init"}, {Container: "one"}, {Container: "two"}}, true},
		{"one container exited 1", runToCompletionPod("b", corev1.RestartPolicyNever, nil, "one", "two"),
			[]containerd.Exit{{Container: "one"}, {Container: "two", Status: 1}}, false},
		{"one container still runs", runToCompletionPod("c", corev1.RestartPolicyNever, nil, "one", "two"),
			[]containerd.Exit{{Container: "one"}}, false},
		{"the init container is not reported", runToCompletionPod("d", corev1.RestartPolicyNever, []string{"init"}, "one"),
			[]containerd.Exit{{Container: "one"}}, false},
		{"OnFailure: failed, restarted, then exited 0", runToCompletionPod("e", corev1.RestartPolicyOnFailure, nil, "one"),
			[]containerd.Exit{{Container: "one", Status: 1}, {Container: "one"}}, true},
		{"Always restarts", runToCompletionPod("f", corev1.RestartPolicyAlways, nil, "one"),
			[]containerd.Exit{{Container: "one"}}, false},
		{"a sidecar", sidecar, []containerd.Exit{{Container: "side"}, {Container: "main"}}, false},
		{"nothing reported", runToCompletionPod("g", corev1.RestartPolicyNever, nil, "one"), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := exitsFor(t, tt.pod)
			for _, x := range tt.exits {
				x.PodUID = tt.pod.UID
				e.record(x)
			}
			if got := e.Succeeded(tt.pod); got != tt.want {
				t.Errorf("Succeeded = %v, want %v", got, tt.want)
			}
		})
	}
}

// Exits of containers of pods that are not PaV's on this node (not in the
// cache), or not of the pod's spec, change nothing.
func TestExitsIgnoresOthers(t *testing.T) {
	pod := runToCompletionPod("pav", corev1.RestartPolicyNever, nil, "main")
	e, told := exitsFor(t, pod)
	e.record(containerd.Exit{PodUID: "tenant", Container: "main"})
	e.record(containerd.Exit{PodUID: "pav", Container: "injected"})
	if len(*told) != 0 || len(e.codes) != 0 {
		t.Errorf("recorded %v, told %v; want nothing", e.codes, *told)
	}
	tenant := runToCompletionPod("tenant", corev1.RestartPolicyNever, nil, "main")
	if e.Succeeded(tenant) {
		t.Error("a tenant's pod succeeded")
	}
	e.record(containerd.Exit{PodUID: "pav", Container: "main"})
	if len(*told) != 1 || !e.Succeeded(pod) {
		t.Errorf("told %v, Succeeded %v: want PaV's pod told and succeeded", *told, e.Succeeded(pod))
	}
	var none *Exits
	if none.Succeeded(pod) {
		t.Error("nil Exits know of a success")
	}
}

// A daemon whose exit the runtime reported before kubelet updated the pod's
// status is described as exited with its code, not as running.
func TestWithReportedExits(t *testing.T) {
	pod := runToCompletionPod("pav", corev1.RestartPolicyAlways, nil, "daemon", "sidecar")
	pod.Status.Phase = corev1.PodRunning
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "daemon", State: running}, {Name: "sidecar", State: running}}
	e, _ := exitsFor(t, pod)
	if got := nodepods.Describe(e.withReportedExits(pod)); got != "phase Running; container daemon running; container sidecar running" {
		t.Errorf("no exit reported: %q", got)
	}
	e.record(containerd.Exit{PodUID: "pav", Container: "daemon", Status: 137})
	if got, want := nodepods.Describe(e.withReportedExits(pod)), "phase Running; container daemon exited with code 137; container sidecar running"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if pod.Status.ContainerStatuses[0].State.Running == nil {
		t.Error("the cached pod was changed")
	}
}
