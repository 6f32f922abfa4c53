// Package nodepods is the core the node plugin's jobs share (staging,
// unstaging, recovery, rollouts, inline volumes): PaV's pods on this node,
// created, found, waited on, described, from the node plugin's pod cache
// (woken by its events, no polling) and the API.
package nodepods

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/protocol"
)

// ByStaging is the pod informer's index of PaV pods by "<phase>/<staging
// ID>" (IndexByStaging).
const ByStaging = "pav-staging"

// IndexByStaging is the index function of ByStaging.
func IndexByStaging(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[protocol.LabelStagingID] == "" {
		return nil, nil
	}
	return []string{pod.Labels[protocol.LabelPhase] + "/" + pod.Labels[protocol.LabelStagingID]}, nil
}

// Pods are PaV's pods on one node.
type Pods struct {
	kube     kubeclient.Interface
	node     string
	root     string // where the pods' /pav directories live
	indexer  cache.Indexer
	lister   corelisters.PodLister
	recorder record.EventRecorder // nil: no Events
	events   *podEvents
}

// New registers on the pod informer, which must only see PaV pods on node
// and carry the ByStaging index. recorder may be nil.
func New(kube kubeclient.Interface, node, root string, informer cache.SharedIndexInformer, recorder record.EventRecorder) *Pods {
	p := &Pods{
		kube: kube, node: node, root: root, recorder: recorder, events: newPodEvents(),
		indexer: informer.GetIndexer(), lister: corelisters.NewPodLister(informer.GetIndexer()),
	}
	_, _ = informer.AddEventHandler(p.events.handler())
	return p
}

// Waiters is how many Waits are on the pod namespace/name now: a test
// knows so that a Wait began.
func (p *Pods) Waiters(namespace, name string) int {
	p.events.mu.Lock()
	defer p.events.mu.Unlock()
	return len(p.events.subs[namespace+"/"+name])
}

// Notify wakes those waiting on pod (Wait) as its informer's events do.
func (p *Pods) Notify(pod *corev1.Pod) { p.events.notify(pod) }

// Create creates a PaV pod, or finds the one an earlier attempt (maybe by
// a previous incarnation of the node plugin) created; a pod that merely holds
// its name is ignored (protocol.CreatePod) and reported in the log and as
// an Event on itself, where its owner looks. dir is the pod's /pav
// directory, removed if the pod is not created or has another.
func (p *Pods) Create(ctx context.Context, pod *corev1.Pod, dir string) (*corev1.Pod, error) {
	got, squatter, err := protocol.CreatePod(ctx, p.kube.CoreV1().Pods(pod.Namespace), pod)
	if squatter != nil {
		msg := fmt.Sprintf("pod %s/%s has the name of PaV's %s pod but was not created by PaV: it is ignored", squatter.Namespace, squatter.Name, pod.Labels[protocol.LabelPhase])
		klog.FromContext(ctx).Info(msg)
		if p.recorder != nil {
			p.recorder.Event(squatter, corev1.EventTypeWarning, "PodNameTaken", msg)
		}
	}
	if err != nil {
		_ = os.Remove(dir)
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if used, _ := protocol.PodHostDir(got, p.root); used != dir {
		_ = os.Remove(dir) // an earlier attempt's pod, with its own /pav
	}
	if got.Spec.NodeName != p.node {
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s exists but runs on node %q", got.Namespace, got.Name, got.Spec.NodeName)
	}
	return got, nil
}

// Cached are the pods of a phase for a staging ID in the cache.
func (p *Pods) Cached(phase protocol.Phase, id string) ([]*corev1.Pod, error) {
	objs, err := p.indexer.ByIndex(ByStaging, string(phase)+"/"+id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	pods := make([]*corev1.Pod, len(objs))
	for i, obj := range objs {
		pods[i] = obj.(*corev1.Pod)
	}
	return pods, nil
}

// List lists the cached pods that sel selects.
func (p *Pods) List(sel labels.Selector) ([]*corev1.Pod, error) { return p.lister.List(sel) }

// Find finds the pod of a phase for a staging ID (of several, the
// newerStaging), first in the cache, then (in case the cache lags behind a
// create) in the API.
func (p *Pods) Find(ctx context.Context, phase protocol.Phase, id string) (*corev1.Pod, error) {
	cached, err := p.Cached(phase, id)
	if err != nil {
		return nil, err
	}
	var pod *corev1.Pod
	for _, c := range cached {
		if pod == nil || newerStaging(c, pod) {
			pod = c
		}
	}
	if pod != nil {
		return pod, nil
	}
	sel := labels.Set{protocol.LabelPhase: string(phase), protocol.LabelStagingID: id}.AsSelector().String()
	list, err := p.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		LabelSelector: sel,
		FieldSelector: "spec.nodeName=" + p.node,
	})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "listing %s pods: %v", phase, err)
	}
	for i := range list.Items {
		if pod == nil || newerStaging(&list.Items[i], pod) {
			pod = &list.Items[i]
		}
	}
	return pod, nil
}

// newerStaging: of two pods of one staging, a is the one that serves (or
// will) rather than b: not being deleted (a recovery keeps the pod it
// replaces until the new one exists), else created later.
func newerStaging(a, b *corev1.Pod) bool {
	if (a.DeletionTimestamp == nil) != (b.DeletionTimestamp == nil) {
		return a.DeletionTimestamp == nil
	}
	return a.CreationTimestamp.After(b.CreationTimestamp.Time)
}

// Live gets a pod from the API; nil if it does not exist.
func (p *Pods) Live(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := p.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting pod %s/%s: %v", namespace, name, err)
	}
	return pod, nil
}

// Wait waits until done(pod) holds, re-checking on every informer event for
// the pod (and Notify) and, if dir is set, every change in that directory
// (for /pav/ready). done gets nil once the pod is gone. It returns the last
// state seen (nil if gone). Until the cache has seen the pod (just
// created), the given object stands in for it.
func (p *Pods) Wait(ctx context.Context, pod *corev1.Pod, dir string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	events, unsubscribe := p.events.subscribe(pod.Namespace, pod.Name)
	defer unsubscribe()
	var fsEvents chan fsnotify.Event
	var fsErrors chan error
	if dir != "" {
		w, err := fsnotify.NewWatcher()
		if err == nil {
			defer w.Close()
			if err := w.Add(dir); err != nil {
				klog.FromContext(ctx).Error(err, "Watching the pod's /pav; relying on pod events only", "dir", dir)
			} else {
				fsEvents, fsErrors = w.Events, w.Errors
			}
		}
	}
	last := pod
	seen := false
	for {
		cached, err := p.lister.Pods(pod.Namespace).Get(pod.Name)
		switch {
		case err == nil && cached.UID == pod.UID:
			seen, last = true, cached
		case err == nil: // a new pod of the same name: ours is gone
			last = nil
		case apierrors.IsNotFound(err) && seen:
			last = nil
		}
		if done(last) {
			return last, nil
		}
		if last == nil {
			return nil, nil
		}
		select {
		case <-events:
		case <-fsEvents:
		case err := <-fsErrors:
			klog.FromContext(ctx).Error(err, "Watching the pod's /pav", "dir", dir)
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
}

// Stopped: no container of the pod runs any more.
func Stopped(pod *corev1.Pod) bool {
	if protocol.Terminated(pod) {
		return true
	}
	if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodPending {
		return false
	}
	n := 0
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil {
				return false
			}
			if cs.State.Terminated != nil {
				n++
			}
		}
	}
	return n > 0 && n == len(pod.Status.ContainerStatuses)+len(pod.Status.InitContainerStatuses)
}

// Describe summarises why a pod is not done, for messages kubelet shows.
func Describe(pod *corev1.Pod) string {
	if pod == nil {
		return "the pod is gone"
	}
	parts := []string{"phase " + string(pod.Status.Phase)}
	if pod.Status.Phase == "" {
		parts = []string{"not yet started"}
	}
	if pod.Status.Reason != "" || pod.Status.Message != "" {
		parts = append(parts, strings.TrimSpace(pod.Status.Reason+" "+pod.Status.Message))
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			switch {
			case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
				parts = append(parts, fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
			case cs.State.Running != nil:
				parts = append(parts, fmt.Sprintf("container %s running", cs.Name))
			case cs.State.Terminated != nil:
				parts = append(parts, fmt.Sprintf("container %s exited with code %d", cs.Name, cs.State.Terminated.ExitCode))
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				parts = append(parts, strings.TrimSpace(fmt.Sprintf("container %s last exited with code %d %s", cs.Name, t.ExitCode, protocol.TerminationMessage(pod, cs.Name, t, false))))
			}
		}
	}
	return strings.TrimSpace(strings.Join(parts, "; "))
}

// BeforeDeadline returns a context that ends margin before ctx's deadline,
// so that a wait that runs out still leaves time to answer kubelet with a
// useful message instead of a bare DeadlineExceeded.
func BeforeDeadline(ctx context.Context, margin time.Duration) (context.Context, context.CancelFunc) {
	d, ok := ctx.Deadline()
	if !ok || time.Until(d) < 2*margin {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, d.Add(-margin))
}
