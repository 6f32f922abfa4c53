package nodeagent

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/nodeagent/containerd"
)

// podsByUID indexes PaV's pods by UID, for matching the runtime's reports.
const podsByUID = "pav-uid"

// Exits keeps what the container runtime reported about the containers of
// PaV's pods on this node (containerd.Watch), so that a run-to-completion pod
// is known to have succeeded the moment its last container exits, not when
// kubelet's next relist puts it into the pod status. Only pods in the node
// plugin's cache count (PaV's pods on this node, matched by UID): exits of
// any other container change nothing. A nil *Exits knows nothing.
type Exits struct {
	pods cache.Indexer
	mu   sync.Mutex
	// exit status of the last exit of each container, by pod UID and container name
	codes map[types.UID]map[string]uint32
	// onExit is called after an exit of one of pod's containers was recorded.
	onExit []func(pod *corev1.Pod)
}

// NewExits registers on podInformer (PaV's pods on this node, with
// PodIndexers) to forget pods once they are gone.
func NewExits(podInformer cache.SharedIndexInformer) *Exits {
	e := &Exits{pods: podInformer.GetIndexer(), codes: map[types.UID]map[string]uint32{}}
	_, _ = podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if pod, ok := obj.(*corev1.Pod); ok {
			e.mu.Lock()
			delete(e.codes, pod.UID)
			e.mu.Unlock()
		}
	}})
	return e
}

// OnExit adds f to what is called, outside any lock, after the exit of a
// container of pod was recorded. Call it before exits are recorded.
func (e *Exits) OnExit(f func(pod *corev1.Pod)) {
	if e == nil {
		return
	}
	e.onExit = append(e.onExit, f)
}

// record notes the exit of a container; it is ignored unless the container
// is one of a PaV pod in the cache.
func (e *Exits) record(x containerd.Exit) {
	// The cache is read under e.mu: the informer removes a pod from its
	// cache before the delete handler forgets the pod's codes under e.mu, so
	// an exit of a pod being deleted is either forgotten with it or not
	// recorded at all, never left behind.
	e.mu.Lock()
	objs, err := e.pods.ByIndex(podsByUID, string(x.PodUID))
	var pod *corev1.Pod
	if err == nil && len(objs) == 1 {
		pod, _ = objs[0].(*corev1.Pod)
	}
	if pod == nil || !hasContainer(pod, x.Container) {
		e.mu.Unlock()
		return
	}
	if e.codes[pod.UID] == nil {
		e.codes[pod.UID] = map[string]uint32{}
	}
	e.codes[pod.UID][x.Container] = x.Status
	e.mu.Unlock()
	klog.V(2).InfoS("Container of a PaV pod exited, says the runtime", "pod", klog.KObj(pod), "container", x.Container, "status", x.Status)
	for _, f := range e.onExit {
		f(pod)
	}
}

// Succeeded says whether the runtime reported that every container of pod,
// init containers included, exited with status 0, none of which will be
// started again: only for restart policies Never and OnFailure (a container
// that exited 0 stays so) and without restartable init containers
// (sidecars). Then kubelet will report the pod Succeeded too.
func (e *Exits) Succeeded(pod *corev1.Pod) bool {
	if e == nil || pod == nil || len(pod.Spec.Containers) == 0 {
		return false
	}
	if p := pod.Spec.RestartPolicy; p != corev1.RestartPolicyNever && p != corev1.RestartPolicyOnFailure {
		return false
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return false
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	codes := e.codes[pod.UID]
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if code, ok := codes[c.Name]; !ok || code != 0 {
				return false
			}
		}
	}
	return true
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// indexPodUID is the podsByUID index function.
func indexPodUID(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return []string{string(pod.UID)}, nil
}

// anyExited says whether the runtime reported an exit of one of pod's
// (non-init) containers: a long-running staging pod's daemon stopped.
func (e *Exits) anyExited(pod *corev1.Pod) bool {
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	codes := e.codes[pod.UID]
	for _, c := range pod.Spec.Containers {
		if _, ok := codes[c.Name]; ok {
			return true
		}
	}
	return false
}

// withReportedExits is pod with the exits the runtime reported and the API
// does not show yet: a container still "running" in the pod's status whose
// exit was recorded shows as terminated with its code, so what PaV says about
// a stopped pod matches why it acted.
func (e *Exits) withReportedExits(pod *corev1.Pod) *corev1.Pod {
	if e == nil || pod == nil {
		return pod
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	codes := e.codes[pod.UID]
	if len(codes) == 0 {
		return pod
	}
	pod = pod.DeepCopy()
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if code, ok := codes[cs.Name]; ok && cs.State.Terminated == nil {
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code)}}
		}
	}
	return pod
}
