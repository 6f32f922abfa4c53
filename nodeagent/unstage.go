// Unstaging: stop the staging pod, run the unstaging pod, clean up.

package nodeagent

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/nodeagent/nodepods"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// teardown stops a staging pod, runs the unstaging pod, cleans up the
// staging pod's directory and finally releases the pod. Every step can be
// repeated: the staging pod's finalizer and annotations record progress.
func (s *Stager) teardown(ctx context.Context, driver string, pod *corev1.Pod) error {
	current, err := s.stopStaging(ctx, driver, pod)
	if err != nil || current == nil {
		return err
	}
	return s.removeFinalizer(ctx, current)
}

// stopStaging is teardown but for releasing the pod, which it returns (nil
// if the pod is gone already): a recovery keeps the stopped pod, and the
// record it carries, until its replacement exists.
func (s *Stager) stopStaging(ctx context.Context, driver string, pod *corev1.Pod) (*corev1.Pod, error) {
	id := pod.Labels[protocol.LabelStagingID]
	if pod.DeletionTimestamp == nil {
		if err := s.deletePod(ctx, pod); err != nil {
			return nil, err
		}
	}
	waitCtx, cancel := nodepods.BeforeDeadline(ctx, 2*time.Second)
	defer cancel()
	last, err := s.nodePods.Wait(waitCtx, pod, "", func(p *corev1.Pod) bool { return p == nil || nodepods.Stopped(p) })
	if err != nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "waiting for staging pod %s/%s to stop: %s", pod.Namespace, pod.Name, nodepods.Describe(last))
	}
	current, err := s.nodePods.Live(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return nil, err
	}
	if current != nil {
		pod = current
	}
	if pod.Annotations[protocol.AnnotationUnstaged] != "true" {
		if err := s.runUnstaging(ctx, driver, pod, id); err != nil {
			return nil, err
		}
		if current != nil {
			if err := s.patchAnnotations(ctx, pod, map[string]interface{}{protocol.AnnotationUnstaged: "true"}); err != nil {
				return nil, err
			}
		}
	}
	if err := s.removeUnstagingPods(ctx, id); err != nil {
		return nil, err
	}
	if dir, err := protocol.PodHostDir(pod, s.root); err == nil {
		if err := mounts.CleanupDir(s.mounter, dir); err != nil {
			return nil, status.Errorf(codes.Internal, "cleaning up the staging pod's /pav: %v", err)
		}
	}
	return current, nil
}

// runUnstaging runs the provisioner's unstaging pod, if it has one, for a
// stopped staging pod, and waits until it succeeded.
func (s *Stager) runUnstaging(ctx context.Context, driver string, stagingPod *corev1.Pod, id string) error {
	p, err := s.provisioner(driver)
	if err != nil {
		return err
	}
	req, err := s.unstagingRequest(ctx, stagingPod)
	if err != nil {
		return err
	}
	tmpl, err := s.engine.Unstaging(ctx, p, req)
	if err != nil {
		return status.Errorf(codes.FailedPrecondition, "evaluating spec.volumeUnstaging of PavProvisioner %s: %v", p.Name, err)
	}
	if tmpl == nil {
		return nil
	}
	pod, err := s.unstagingPodFor(ctx, p.Name, tmpl, req, stagingPod, id)
	if err != nil {
		return err
	}
	dir, err := protocol.PodHostDir(pod, s.root)
	if err != nil {
		return status.Errorf(codes.Internal, "unstaging pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	waitCtx, cancel := nodepods.BeforeDeadline(ctx, 2*time.Second)
	defer cancel()
	last, err := s.nodePods.Wait(waitCtx, pod, "", func(p *corev1.Pod) bool {
		return p == nil || protocol.Terminated(p) || failedNever(p) || s.exits.Succeeded(p)
	})
	if err != nil {
		return status.Errorf(codes.DeadlineExceeded, "unstaging pod %s/%s is not done yet: %s", pod.Namespace, pod.Name, nodepods.Describe(last))
	}
	if last == nil {
		return status.Errorf(codes.Aborted, "unstaging pod %s/%s was deleted before it completed", pod.Namespace, pod.Name)
	}
	succeeded, err := s.succeeded(ctx, last)
	if err != nil {
		return err
	}
	if !succeeded {
		msg := s.failureMessage(ctx, last, dir)
		// Remove the failed pod so that the next call (kubelet retries) runs a new one.
		if err := s.deletePod(ctx, last); err != nil {
			klog.FromContext(ctx).Error(err, "Deleting failed unstaging pod")
		}
		return status.Errorf(codes.Internal, "unstaging pod %s/%s failed: %s", last.Namespace, last.Name, msg)
	}
	return nil
}

// unstagingPodFor is the unstaging pod of staging id: the one found, or a
// new one from tmpl once the remains of a failed attempt are gone.
func (s *Stager) unstagingPodFor(ctx context.Context, provisioner string, tmpl *corev1.PodTemplateSpec, req templating.StagingRequest, stagingPod *corev1.Pod, id string) (*corev1.Pod, error) {
	pod, err := s.nodePods.Find(ctx, protocol.PhaseUnstaging, id)
	if err != nil {
		return nil, err
	}
	if pod != nil && pod.DeletionTimestamp != nil {
		// The remains of a failed attempt: wait until it is gone, then start afresh.
		waitCtx, cancel := nodepods.BeforeDeadline(ctx, 2*time.Second)
		defer cancel()
		if _, err := s.nodePods.Wait(waitCtx, pod, "", func(p *corev1.Pod) bool { return p == nil }); err != nil {
			return nil, status.Errorf(codes.DeadlineExceeded, "waiting for the previous unstaging pod %s/%s to go away", pod.Namespace, pod.Name)
		}
		pod = nil
	}
	if pod == nil {
		built := protocol.UnstagingPod(protocol.PodBase{Template: tmpl, Provisioner: provisioner, Root: s.root}, protocol.UnstagingPodSpec{
			Node: s.node, StagingID: id, PV: req.PV, PVC: req.PVC,
			TargetPath: stagingPod.Annotations[protocol.AnnotationTargetPath], ReadOnly: req.ReadOnly})
		dir, err := protocol.PodHostDir(built, s.root)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "%v", err)
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "creating %s: %v", dir, err)
		}
		return s.nodePods.Create(ctx, built, dir)
	}
	return pod, nil
}

// removeUnstagingPods deletes the (terminated) unstaging pods of a staging
// and their directories.
func (s *Stager) removeUnstagingPods(ctx context.Context, id string) error {
	pods, err := s.nodePods.Cached(protocol.PhaseUnstaging, id)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if !protocol.Terminated(pod) && !s.exits.Succeeded(pod) && pod.DeletionTimestamp == nil {
			continue // not ours to stop; it was created for a staging we still track
		}
		if err := s.deletePod(ctx, pod); err != nil {
			return err
		}
		if dir, err := protocol.PodHostDir(pod, s.root); err == nil {
			if err := mounts.CleanupDir(s.mounter, dir); err != nil {
				return status.Errorf(codes.Internal, "cleaning up the unstaging pod's /pav: %v", err)
			}
		}
	}
	return nil
}

// unstagingRequest rebuilds the staging context for unstaging: live objects
// where they still exist, else the snapshots on the staging pod.
func (s *Stager) unstagingRequest(ctx context.Context, stagingPod *corev1.Pod) (templating.StagingRequest, error) {
	ann := stagingPod.Annotations
	pub := protocol.PublicationOf(stagingPod)
	req := templating.StagingRequest{ReadOnly: pub.ReadOnly, MountOptions: pub.MountOptions, FSType: pub.FSType}

	snapPVC := &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal([]byte(ann[protocol.AnnotationClaimSnapshot]), snapPVC); err != nil {
		snapPVC = nil
	}
	if ns, name, ok := strings.Cut(ann[protocol.AnnotationClaim], "/"); ok {
		pvc, err := s.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && (snapPVC == nil || pvc.UID == snapPVC.UID):
			req.PVC = pvc
		case err != nil && !apierrors.IsNotFound(err):
			return req, status.Errorf(codes.Unavailable, "getting claim %s/%s: %v", ns, name, err)
		}
		if req.PVC == nil && snapPVC == nil {
			snapPVC = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		}
	}
	if req.PVC == nil {
		if snapPVC == nil {
			return req, status.Errorf(codes.FailedPrecondition, "staging pod %s/%s does not say which claim it staged", stagingPod.Namespace, stagingPod.Name)
		}
		klog.FromContext(ctx).Info("Claim is gone; unstaging with the copy taken at staging time", "claim", klog.KObj(snapPVC))
		req.PVC = snapPVC
	}

	snapPV := &corev1.PersistentVolume{}
	if err := json.Unmarshal([]byte(ann[protocol.AnnotationVolumeSnapshot]), snapPV); err != nil || snapPV.Name == "" {
		return req, status.Errorf(codes.FailedPrecondition, "staging pod %s/%s has no PersistentVolume snapshot", stagingPod.Namespace, stagingPod.Name)
	}
	pv, err := s.kube.CoreV1().PersistentVolumes().Get(ctx, snapPV.Name, metav1.GetOptions{})
	switch {
	case err == nil && pv.UID == snapPV.UID:
		req.PV = pv
	case err != nil && !apierrors.IsNotFound(err):
		return req, status.Errorf(codes.Unavailable, "getting PersistentVolume %s: %v", snapPV.Name, err)
	default:
		klog.FromContext(ctx).Info("PersistentVolume is gone; unstaging with the copy taken at staging time", "pv", snapPV.Name)
		req.PV = snapPV
	}

	node, err := s.kube.CoreV1().Nodes().Get(ctx, s.node, metav1.GetOptions{})
	if err != nil {
		return req, status.Errorf(codes.Unavailable, "getting node %s: %v", s.node, err)
	}
	req.Node = node
	return req, nil
}
