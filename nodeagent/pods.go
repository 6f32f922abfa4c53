// PaV's staging and unstaging pods: creating, finding, waiting on and
// deleting them, and saying why one failed.

package nodeagent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	return s.nodePods.Create(ctx, pod, dir)
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
		live, err := s.nodePods.Live(ctx, pod.Namespace, pod.Name)
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
