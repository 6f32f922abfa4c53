package protocol

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	typedcorev1 "github.com/albertofaria/pav/kubeclient/generated/clientset/typed/core/v1"
)

// What both processes do with PaV's pods once they run: tell whether one
// ended, say why it failed, and delete it.

// Terminated: the pod ended for good: it succeeded (Succeeded) or failed,
// or it was deleted before it was scheduled (NeverRan).
func Terminated(pod *corev1.Pod) bool {
	return Succeeded(pod) || pod.Status.Phase == corev1.PodFailed || NeverRan(pod)
}

// NeverRan: the pod was deleted before it was scheduled, so no kubelet will
// ever run it or report its end (a pod with a finalizer stays until then).
func NeverRan(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && pod.Spec.NodeName == "" && !Succeeded(pod)
}

// Going: the pod is on its way out, not held by FinalizerResult; a pod that
// is held stays, deleted or not, until the controller has acted on it.
func Going(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp != nil && !HasFinalizer(pod, FinalizerResult)
}

// Succeeded: kubelet reported the pod Succeeded, or PaV's node plugin
// recorded that the container runtime reported every container exited 0
// (AnnotationSucceeded), which is final: a Failed phase kubelet reports
// after it (an eviction racing the last exit, say) changes nothing, for
// the pod's work was done and PaV may have acted on it already.
func Succeeded(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Annotations[AnnotationSucceeded] == "true"
}

// How much of a failed container's log goes into a failure message, and how
// long reading it may take.
const (
	logTailLines   = 10
	logTailBytes   = 4096
	logTailTimeout = 5 * time.Second
)

// LogTail returns the last lines of a container's log (at most 10 lines and
// 4 KiB, read within 5 s), without the final newline.
func LogTail(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod, container string) (string, error) {
	lines, limit := int64(logTailLines), int64(logTailBytes)
	ctx, cancel := context.WithTimeout(ctx, logTailTimeout)
	defer cancel()
	rc, err := pods.GetLogs(pod.Name, &corev1.PodLogOptions{Container: container, TailLines: &lines, LimitBytes: &limit}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return strings.TrimRight(string(b), "\n"), err
}

// TerminationMessage is the message container name of pod left when it
// ended (t), unless logs is false and kubelet may have taken it from the
// container's log (terminationMessagePolicy FallbackToLogsOnError): logs may
// hold secrets, and PaV puts these messages into Events tenants read. A
// message the container wrote to its terminationMessagePath (policy File,
// the default) is always its own word.
func TerminationMessage(pod *corev1.Pod, name string, t *corev1.ContainerStateTerminated, logs bool) string {
	if !logs {
		for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range list {
				if c.Name == name && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
					return ""
				}
			}
		}
	}
	return strings.TrimSpace(t.Message)
}

// FailureMessage explains why a pod failed, preferring what the pod itself
// said: pavError (its /pav/error, "" if none), else the failed container's
// termination message and exit code, else the exit code and the last lines
// of its log, else the pod's own reason and message. logs nil: nothing from
// the pod's log (see TerminationMessage), for a provisioner without
// spec.podLogsInEvents.
func FailureMessage(pod *corev1.Pod, pavError string, logs func(container string) (string, error)) string {
	if msg := strings.TrimSpace(pavError); msg != "" {
		return msg
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			t := cs.State.Terminated
			if t == nil {
				t = cs.LastTerminationState.Terminated
			}
			if t == nil || t.ExitCode == 0 {
				continue
			}
			head := fmt.Sprintf("container %q exited with code %d", cs.Name, t.ExitCode)
			if t.Reason != "" && t.Reason != "Error" {
				head += " (" + t.Reason + ")"
			}
			if msg := TerminationMessage(pod, cs.Name, t, logs != nil); msg != "" {
				return head + ": " + msg
			}
			if logs != nil {
				if tail, err := logs(cs.Name); err == nil && strings.TrimSpace(tail) != "" {
					return head + "; last lines of its log:\n" + strings.TrimRight(tail, "\n")
				}
			}
			return head
		}
	}
	switch {
	case NeverRan(pod):
		return fmt.Sprintf("pod %s/%s was deleted before it was scheduled", pod.Namespace, pod.Name)
	case pod.Status.Reason != "" && pod.Status.Message != "":
		return fmt.Sprintf("pod %s/%s failed: %s: %s", pod.Namespace, pod.Name, pod.Status.Reason, pod.Status.Message)
	case pod.Status.Message != "":
		return fmt.Sprintf("pod %s/%s failed: %s", pod.Namespace, pod.Name, pod.Status.Message)
	case pod.Status.Reason != "":
		return fmt.Sprintf("pod %s/%s failed: %s", pod.Namespace, pod.Name, pod.Status.Reason)
	}
	return fmt.Sprintf("pod %s/%s failed", pod.Namespace, pod.Name)
}

// DeletePod deletes this incarnation of a PaV pod (a UID precondition): at
// once if it terminated (its containers are gone, its results collected),
// else with its grace period, and not again while that runs. It first
// removes FinalizerResult (on this version of the pod: a conflict is
// returned), so a crash in between leaves a pod that is deleted again. A
// pod already gone or replaced is not an error.
func DeletePod(ctx context.Context, pods typedcorev1.PodInterface, pod *corev1.Pod) error {
	if HasFinalizer(pod, FinalizerResult) {
		updated, err := RemoveFinalizer(ctx, pods.Patch, pod, FinalizerResult)
		if err != nil {
			return err
		}
		if updated == nil || updated.DeletionTimestamp != nil {
			return nil // gone, or deleted already and now let go
		}
		pod = updated
	}
	if pod.DeletionTimestamp != nil && !Terminated(pod) {
		return nil
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}
	if Terminated(pod) {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	err := pods.Delete(ctx, pod.Name, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}
