// PaV's staging and unstaging pods: creating, finding, waiting on and
// deleting them, and saying why one failed.

package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/nodeagent/collector"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// createStagingPod evaluates volumeStaging (after static validation for
// statically provisioned PVs) and creates the staging pod, pinned to this
// node. A pod of the same name that already exists is reused.
func (s *Stager) createStagingPod(ctx context.Context, driver, id string, cached *corev1.PersistentVolume, req *pavcsi.PublishRequest, extra map[string]string, nameSuffix string) (*corev1.Pod, error) {
	p, err := s.provisioner(driver)
	if err != nil {
		return nil, err
	}
	pv, pvc, err := s.stagedObjects(ctx, p, driver, cached)
	if err != nil {
		return nil, err
	}
	node, err := s.kube.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting node %s: %v", s.node, err)
	}
	tmpl, err := s.engine.Staging(ctx, p, templating.StagingRequest{PVC: pvc, PV: pv, Node: node, ReadOnly: req.ReadOnly,
		MountOptions: req.MountFlags, FSType: req.FSType})
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeStaging of PavProvisioner %s: %v", p.Name, err)
	}
	if tmpl == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s has no spec.volumeStaging.podTemplate", p.Name)
	}
	pod, err := protocol.StagingPod(protocol.PodBase{Template: tmpl, Provisioner: p.Name, Root: s.root}, protocol.StagingPodSpec{
		Revision: templating.StagingRevision(p), Node: s.node, StagingID: id, PV: pv, PVC: pvc,
		Publication: protocol.Publication{TargetPath: req.TargetPath, ReadOnly: req.ReadOnly, MountOptions: req.MountFlags, FSType: req.FSType,
			ClientPodUID: req.ClientPodUID}})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	for k, v := range extra {
		pod.Annotations[k] = v
	}
	pod.Name += nameSuffix // a replacement runs beside the pod it replaces
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, status.Errorf(codes.Internal, "creating %s: %v", dir, err)
	}
	return s.createPod(ctx, pod, dir)
}

// stagedObjects are the PV and claim a staging pod is made for: read from
// the API (the cache holds only what finds PVs; templates and the staging
// pod's snapshot need the whole PV), or for an inline volume the made-up
// ones.
func (s *Stager) stagedObjects(ctx context.Context, p *v1alpha1.PavProvisioner, driver string, cached *corev1.PersistentVolume) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim, error) {
	if v, ok := protocol.InlineOf(cached); ok {
		return cached, protocol.InlineClaim(v), nil
	}
	pv, err := s.kube.CoreV1().PersistentVolumes().Get(ctx, cached.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, status.Errorf(codes.Unavailable, "getting PersistentVolume %s: %v", cached.Name, err)
	}
	if pv.UID != cached.UID {
		return nil, nil, status.Errorf(codes.Unavailable, "PersistentVolume %s was replaced (kubelet will call again)", cached.Name)
	}
	if pv.Annotations[protocol.AnnotationProvisionedBy] != driver {
		if !p.HasMode(v1alpha1.Static) {
			return nil, nil, status.Errorf(codes.FailedPrecondition,
				"PersistentVolume %s was not provisioned by PavProvisioner %s, which does not support static provisioning (provisioningModes lacks Static)", pv.Name, p.Name)
		}
		if err := s.engine.CheckStatic(ctx, p, pv); err != nil {
			return nil, nil, status.Errorf(codes.FailedPrecondition, "PersistentVolume %s is not valid for PavProvisioner %s: %v", pv.Name, p.Name, err)
		}
	}
	if pv.Spec.ClaimRef == nil {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "PersistentVolume %s is not bound to a claim", pv.Name)
	}
	pvc, err := s.kube.CoreV1().PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(ctx, pv.Spec.ClaimRef.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, status.Errorf(codes.FailedPrecondition, "getting claim %s/%s of PersistentVolume %s: %v", pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, pv.Name, err)
	}
	return pv, pvc, nil
}

// createPod creates a PaV pod, or finds the one an earlier attempt (maybe by
// a previous incarnation of the node plugin) created; a pod that merely holds
// its name is ignored (protocol.CreatePod) and reported in the log and as
// an Event on itself, where its owner looks.
func (s *Stager) createPod(ctx context.Context, pod *corev1.Pod, dir string) (*corev1.Pod, error) {
	got, squatter, err := protocol.CreatePod(ctx, s.kube.CoreV1().Pods(pod.Namespace), pod)
	if squatter != nil {
		msg := fmt.Sprintf("pod %s/%s has the name of PaV's %s pod but was not created by PaV: it is ignored", squatter.Namespace, squatter.Name, pod.Labels[protocol.LabelPhase])
		klog.FromContext(ctx).Info(msg)
		if s.recorder != nil {
			s.recorder.Event(squatter, corev1.EventTypeWarning, "PodNameTaken", msg)
		}
	}
	if err != nil {
		_ = os.Remove(dir)
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	if used, _ := protocol.PodHostDir(got, s.root); used != dir {
		_ = os.Remove(dir) // an earlier attempt's pod, with its own /pav
	}
	if got.Spec.NodeName != s.node {
		return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s exists but runs on node %q", got.Namespace, got.Name, got.Spec.NodeName)
	}
	return got, nil
}

// findPod finds the pod of a phase for a staging ID (of several, the
// newerStaging), first in the cache, then (in case the cache lags behind a
// create) in the API.
func (s *Stager) findPod(ctx context.Context, phase protocol.Phase, id string) (*corev1.Pod, error) {
	objs, err := s.pods.ByIndex(podsByStaging, string(phase)+"/"+id)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	var pod *corev1.Pod
	for _, obj := range objs {
		if p := obj.(*corev1.Pod); pod == nil || newerStaging(p, pod) {
			pod = p
		}
	}
	if pod != nil {
		return pod, nil
	}
	sel := labels.Set{protocol.LabelPhase: string(phase), protocol.LabelStagingID: id}.AsSelector().String()
	list, err := s.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		LabelSelector: sel,
		FieldSelector: "spec.nodeName=" + s.node,
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

// livePod gets a pod from the API; nil if it does not exist.
func (s *Stager) livePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := s.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting pod %s/%s: %v", namespace, name, err)
	}
	return pod, nil
}

// wait waits until done(pod) holds, re-checking on every informer event for
// the pod and, if dir is set, every change in that directory (for
// /pav/ready). done gets nil once the pod is gone. It returns the last state
// seen (nil if gone). Until the cache has seen the pod (just created), the
// given object stands in for it.
func (s *Stager) wait(ctx context.Context, pod *corev1.Pod, dir string, done func(*corev1.Pod) bool) (*corev1.Pod, error) {
	events, unsubscribe := s.events.subscribe(pod.Namespace, pod.Name)
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
		cached, err := s.podLister.Pods(pod.Namespace).Get(pod.Name)
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

type stagingState int

const (
	stagingPending stagingState = iota
	stagingReady
	stagingFailed
	stagingGone
)

// stagingStateOf: a staging pod is done when it succeeded (see
// Stager.succeeded), or while it runs once it created /pav/ready; it failed
// when it failed, or when a container failed that will not be restarted.
func stagingStateOf(pod *corev1.Pod, dir string, exits *Exits) stagingState {
	switch {
	case pod == nil:
		return stagingGone
	case pod.DeletionTimestamp != nil:
		return stagingGone
	case protocol.Succeeded(pod):
		return stagingReady
	case pod.Status.Phase == corev1.PodFailed || failedNever(pod):
		return stagingFailed
	case exits.Succeeded(pod):
		return stagingReady
	}
	if _, err := os.Lstat(filepath.Join(dir, protocol.FileReady)); err == nil {
		return stagingReady
	}
	return stagingPending
}

// succeeded says whether a run-to-completion pod succeeded: by kubelet's
// word or, while kubelet has not reported it failed, by the container
// runtime's (Exits), which it first records on the pod
// (protocol.AnnotationSucceeded): from then on the pod counts as succeeded
// whatever kubelet reports, so a decision acted upon is never undone.
func (s *Stager) succeeded(ctx context.Context, pod *corev1.Pod) (bool, error) {
	switch {
	case protocol.Succeeded(pod):
		return true, nil
	case pod.Status.Phase == corev1.PodFailed || failedNever(pod) || !s.exits.Succeeded(pod):
		return false, nil
	}
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{
		"uid":         pod.UID, // this incarnation only
		"annotations": map[string]string{protocol.AnnotationSucceeded: "true"},
	}})
	_, err := s.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, status.Errorf(codes.Aborted, "pod %s/%s was deleted after it completed", pod.Namespace, pod.Name)
	case err != nil:
		return false, status.Errorf(codes.Unavailable, "recording that pod %s/%s succeeded: %v", pod.Namespace, pod.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Pod succeeded, by the container runtime's report", "pod", klog.KObj(pod))
	return true, nil
}

// failedNever: a container exited with an error and will not be restarted.
func failedNever(pod *corev1.Pod) bool {
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return true
			}
		}
	}
	return false
}

// stopped: no container of the pod runs any more.
func stopped(pod *corev1.Pod) bool {
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

// describePod summarises why a pod is not done, for messages kubelet shows.
func describePod(pod *corev1.Pod) string {
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

// failureMessage explains a failed pod in its own words (see
// protocol.FailureMessage), reading /pav/error from dir ("": none), with the
// end of its log only if its provisioner opted in (spec.podLogsInEvents).
func (s *Stager) failureMessage(ctx context.Context, pod *corev1.Pod, dir string) string {
	var pavError string
	if dir != "" {
		if msg, _, err := collector.ReadResultFile(dir, protocol.FileError, collector.MaxErrorBytes); err == nil {
			pavError = msg
		}
	}
	var logs func(string) (string, error)
	if p, err := s.provisioner(pod.Labels[protocol.LabelProvisioner]); err == nil && p.Spec.PodLogsInEvents {
		logs = func(container string) (string, error) {
			return protocol.LogTail(ctx, s.kube.CoreV1().Pods(pod.Namespace), pod, container)
		}
	}
	return protocol.FailureMessage(pod, pavError, logs)
}

// deletePod deletes a PaV pod (see protocol.DeletePod).
func (s *Stager) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := protocol.DeletePod(ctx, s.kube.CoreV1().Pods(pod.Namespace), pod); err != nil {
		return status.Errorf(codes.Unavailable, "%v", err)
	}
	return nil
}

func (s *Stager) patchAnnotations(ctx context.Context, pod *corev1.Pod, ann map[string]interface{}) error {
	patch, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"annotations": ann}})
	_, err := s.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return status.Errorf(codes.Unavailable, "annotating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return nil
}

// removeFinalizer releases the staging pod, which then disappears. It reads
// the pod afresh for each try: a conflict means the pod changed meanwhile.
func (s *Stager) removeFinalizer(ctx context.Context, pod *corev1.Pod) error {
	for attempt := 0; ; attempt++ {
		live, err := s.livePod(ctx, pod.Namespace, pod.Name)
		if err != nil || live == nil || live.UID != pod.UID {
			return err
		}
		_, err = protocol.RemoveFinalizer(ctx, s.kube.CoreV1().Pods(pod.Namespace).Patch, live, protocol.FinalizerStaging)
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt >= 3 {
			return status.Errorf(codes.Unavailable, "%v", err)
		}
	}
}
