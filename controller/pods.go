package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/protocol"
)

var everything = labels.Everything()

// podOutcome is what the controller concluded about one of its run-to-completion pods.
type podOutcome struct {
	// done: terminated and its /pav results collected (or given up on).
	done      bool
	succeeded bool
	// message explains a failure.
	message string
	// handle and capacity are the contents of /pav/handle and /pav/capacity, if the pod wrote them.
	handle, capacity *string
	// infeasible is the content of /pav/infeasible, if an expansion or
	// modification pod wrote it.
	infeasible *string
	// attributes is the content of /pav/volume-attributes, if a creation
	// pod wrote it; resultError what the pod (or the node plugin refusing
	// one of its files) wrote to /pav/error.
	attributes  *string
	resultError string
	// maximumVolumeSize is the content of /pav/maximum-volume-size, if a
	// capacity pod wrote it.
	maximumVolumeSize *string
	// recheck > 0: not done yet, look again after this long even if nothing changes.
	recheck time.Duration
	// stuck explains why a pod that is not done cannot make progress (e.g. its
	// image cannot be pulled), so the user sees it on the claim or volume.
	stuck string
}

// waitingReasons are container states that need a human (or a long wait).
var waitingReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// stuckReason explains why a pod that has not terminated is not getting anywhere.
func stuckReason(pod *corev1.Pod) string {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("pod %s/%s cannot be scheduled: %s", pod.Namespace, pod.Name, cond.Message)
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if w := cs.State.Waiting; w != nil && waitingReasons[w.Reason] {
				return fmt.Sprintf("container %q of pod %s/%s cannot start: %s: %s", cs.Name, pod.Namespace, pod.Name, w.Reason, w.Message)
			}
		}
	}
	return ""
}

// terminationTime is when the pod's last container ended (best effort).
func terminationTime(pod *corev1.Pod) time.Time {
	var t time.Time
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if s := cs.State.Terminated; s != nil && s.FinishedAt.Time.After(t) {
				t = s.FinishedAt.Time
			}
		}
	}
	if t.IsZero() {
		for _, cond := range pod.Status.Conditions {
			if cond.LastTransitionTime.Time.After(t) {
				t = cond.LastTransitionTime.Time
			}
		}
	}
	if t.IsZero() {
		t = pod.CreationTimestamp.Time
	}
	return t
}

// examinePod decides whether a PaV pod is done. A pod counts as done only
// once it terminated (kubelet's phase, or the node plugin's record that the
// container runtime saw every container exit 0: protocol.Succeeded) AND the
// node plugin collected its /pav files (AnnotationResultsCollected, written
// together with that record); only then are the results known and may the
// pod be deleted. If no node plugin collects them within resultsTimeout (e.g.
// the node runs no `pav node`), the controller stops waiting: the pod's
// phase decides, except that a creation pod then counts as failed, because
// its handle and capacity files would be silently ignored.
func examinePod(pod *corev1.Pod, now time.Time, resultsTimeout time.Duration, logs func(container string) (string, error)) podOutcome {
	if !protocol.Terminated(pod) {
		return podOutcome{stuck: stuckReason(pod)}
	}
	out := podOutcome{done: true, succeeded: protocol.Succeeded(pod)}
	ann := pod.Annotations
	var note string
	if ann[protocol.AnnotationResultsCollected] != "true" && !protocol.NeverRan(pod) {
		elapsed := now.Sub(terminationTime(pod))
		if elapsed < resultsTimeout {
			return podOutcome{recheck: resultsTimeout - elapsed}
		}
		note = fmt.Sprintf("the files pod %s/%s left in /pav were not collected within %v (is PaV's node plugin running on node %q?)",
			pod.Namespace, pod.Name, resultsTimeout, pod.Spec.NodeName)
		if out.succeeded && protocol.Phase(pod.Labels[protocol.LabelPhase]) == protocol.PhaseCreation {
			out.succeeded = false
			out.message = note
			return out
		}
	} else {
		if v, ok := ann[protocol.AnnotationResultHandle]; ok {
			out.handle = &v
		}
		if v, ok := ann[protocol.AnnotationResultCapacity]; ok {
			out.capacity = &v
		}
		if v, ok := ann[protocol.AnnotationResultInfeasible]; ok {
			out.infeasible = &v
		}
		if v, ok := ann[protocol.AnnotationResultVolumeAttributes]; ok {
			out.attributes = &v
		}
		if v, ok := ann[protocol.AnnotationResultMaximumVolumeSize]; ok {
			out.maximumVolumeSize = &v
		}
		out.resultError = ann[protocol.AnnotationResultError]
	}
	if !out.succeeded {
		out.message = protocol.FailureMessage(pod, pod.Annotations[protocol.AnnotationResultError], logs)
		if note != "" {
			out.message += "; " + note
		}
	}
	return out
}

// examine is examinePod with the controller's clock, timeout and, if the
// pod's provisioner opted in (spec.podLogsInEvents), log access.
func (c *Controller) examine(ctx context.Context, pod *corev1.Pod) podOutcome {
	var logs func(string) (string, error)
	if p := c.provisioner(pod.Labels[protocol.LabelProvisioner]); p != nil && p.Spec.PodLogsInEvents {
		logs = func(container string) (string, error) {
			return protocol.LogTail(ctx, c.kube.CoreV1().Pods(pod.Namespace), pod, container)
		}
	}
	return examinePod(pod, time.Now(), c.cfg.ResultsTimeout, logs)
}

// podWaiter is where a sync waits for its pods: the object that hears about a
// stuck pod, and the queue and key to look again when no watch event will
// say that the results timeout passed.
type podWaiter struct {
	obj   runtime.Object
	queue workqueue.TypedRateLimitingInterface[string]
	key   string
}

// finishedPod examines one of PaV's run-to-completion pods. While the pod is
// not done it reports a stuck pod on w.obj, schedules a recheck and returns
// ok false; once it is done, the outcome is counted in the metrics and
// returned for the caller to act on.
func (c *Controller) finishedPod(ctx context.Context, pod *corev1.Pod, w podWaiter) (r podOutcome, ok bool) {
	r = c.examine(ctx, pod)
	if !r.done {
		if r.stuck != "" {
			c.recorder.Event(w.obj, corev1.EventTypeWarning, reasonPodNotStarting, r.stuck)
		}
		if r.recheck > 0 {
			w.queue.AddAfter(w.key, r.recheck)
		}
		return r, false
	}
	c.metrics.podDone(pod, r.succeeded)
	return r, true
}

// createPod creates a PaV pod built by a protocol pod function (see
// protocol.CreatePod for how a taken name is handled). squatter is a pod
// that holds the pod's deterministic name but is not PaV's: it was ignored,
// and the caller tells the user.
func (c *Controller) createPod(ctx context.Context, pod *corev1.Pod) (squatter *corev1.Pod, err error) {
	phase := phaseOf(pod)
	got, squatter, err := protocol.CreatePod(ctx, c.kube.CoreV1().Pods(pod.Namespace), pod)
	if err != nil {
		return squatter, fmt.Errorf("the %s pod: %w", phase, err)
	}
	klog.V(2).InfoS("Pod created or found", "pod", klog.KObj(got), "phase", phase)
	return squatter, nil
}

// squatterMessage tells the user about a pod that took a PaV pod's name.
func squatterMessage(squatter *corev1.Pod, phase protocol.Phase) string {
	return fmt.Sprintf("pod %s/%s has the name of PaV's %s pod but was not created by PaV: it is ignored, and PaV runs its pod under another name",
		squatter.Namespace, squatter.Name, phase)
}

// deletePod removes a PaV pod. Terminated pods are removed at once (their
// containers are gone and their results collected); others get their grace period.
func (c *Controller) deletePod(ctx context.Context, pod *corev1.Pod) error {
	return protocol.DeletePod(ctx, c.kube.CoreV1().Pods(pod.Namespace), pod)
}

// deletePods removes PaV pods whose outcome has been acted on.
func (c *Controller) deletePods(ctx context.Context, pods []*corev1.Pod) error {
	for _, pod := range pods {
		if err := c.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// podFailed ends an attempt whose pod failed: the pod goes first (its
// failure is acted on here, and the next attempt needs its name), then fail
// reports msg and schedules the next attempt with backoff. A crash between
// the two loses the report and the backoff, not the retry.
func (c *Controller) podFailed(ctx context.Context, pod *corev1.Pod, msg string, fail func(msg string) error) error {
	if err := c.deletePod(ctx, pod); err != nil {
		return err
	}
	return fail(msg)
}

func phaseOf(pod *corev1.Pod) protocol.Phase {
	return protocol.Phase(pod.Labels[protocol.LabelPhase])
}

// byPhase picks, among pods, the one of each phase.
func byPhase(pods []*corev1.Pod) map[protocol.Phase]*corev1.Pod {
	m := make(map[protocol.Phase]*corev1.Pod, len(pods))
	for _, p := range pods {
		m[phaseOf(p)] = p
	}
	return m
}
