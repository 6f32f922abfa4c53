package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// claimDeletionStep is what a claim being deleted needs before it may go.
type claimDeletionStep int

const (
	claimDeletionWait     claimDeletionStep = iota // a pod is going or not done: its events requeue the claim
	claimDeletionFinish                            // nothing (more) to delete: clean up, let the claim go
	claimDeletionFailed                            // the deletion pod failed: report, retry with backoff
	claimDeletionOrphaned                          // no provisioner to delete what was created: report, let go
	claimDeletionRetry                             // the deletion cannot start now: report, retry with backoff
	claimDeletionStart                             // run the deletion (pod, or none)
)

// claimDeletionView is what a sync observed of a claim being deleted while
// PaV holds its finalizer.
type claimDeletionView struct {
	pods         map[protocol.Phase]*corev1.Pod
	podGoing     bool // a pod of a previous attempt is still going
	volumeExists bool // its PV exists (the API server's word)
	// outcome is that of the deletion pod, or without one the creation
	// pod, once it is done (nil before).
	outcome *podOutcome
	p       *v1alpha1.PavProvisioner // nil: gone
	class   *storagev1.StorageClass  // nil: not found
	pvc     *corev1.PersistentVolumeClaim
}

// decideClaimDeletion is the protocol for a claim deleted before it got a
// PV: a creation in progress is allowed to end, and whatever it created is
// deleted before the claim may go. Pure, so that every case is a table row
// (TestDecideClaimDeletion); message explains the reports.
func decideClaimDeletion(v claimDeletionView) (step claimDeletionStep, message string) {
	del, cre := v.pods[protocol.PhaseDeletion], v.pods[protocol.PhaseCreation]
	switch {
	case v.podGoing:
		return claimDeletionWait, ""
	case v.volumeExists:
		// The volume path deletes the PV once it is released.
		return claimDeletionFinish, ""
	case del == nil && cre == nil:
		return claimDeletionFinish, "" // nothing was created
	case v.outcome == nil:
		return claimDeletionWait, ""
	case del != nil && !v.outcome.succeeded:
		return claimDeletionFailed, fmt.Sprintf("deletion pod %s/%s failed: %s", del.Namespace, del.Name, v.outcome.message)
	case del != nil:
		return claimDeletionFinish, ""
	case v.p == nil:
		return claimDeletionOrphaned, fmt.Sprintf("the PavProvisioner is gone; cannot run a deletion pod for what creation pod %s/%s created", cre.Namespace, cre.Name)
	case v.class == nil:
		return claimDeletionRetry, fmt.Sprintf("StorageClass %q not found; it is needed to delete what creation pod %s/%s created", ptrString(v.pvc.Spec.StorageClassName), cre.Namespace, cre.Name)
	}
	return claimDeletionStart, ""
}

// observeDeletion reads what decideClaimDeletion needs, as far as it needs
// it: the PV is read from the API server only when no pod is going, and a
// pod examined (reporting it stuck, scheduling a recheck) only when it is
// the claim's next concern.
func (s *claimSync) observeDeletion(ctx context.Context) (claimDeletionView, error) {
	v := claimDeletionView{pods: s.pods, podGoing: s.anyPodGoing(), p: s.p, class: s.class, pvc: s.pvc}
	if v.podGoing {
		return v, nil
	}
	exists, err := s.volumeExists(ctx, true)
	if err != nil || exists {
		v.volumeExists = exists
		return v, err
	}
	pod := s.pods[protocol.PhaseDeletion]
	if pod == nil {
		pod = s.pods[protocol.PhaseCreation]
	}
	if pod != nil {
		if r, ok := s.finishedPod(ctx, pod); ok {
			v.outcome = &r
		}
	}
	return v, nil
}

// deleted handles a claim being deleted while PaV still holds its finalizer.
func (s *claimSync) deleted(ctx context.Context) error {
	v, err := s.observeDeletion(ctx)
	if err != nil {
		return err
	}
	step, msg := decideClaimDeletion(v)
	switch step {
	case claimDeletionWait:
		return nil
	case claimDeletionFinish:
		return s.finish(ctx)
	case claimDeletionFailed:
		return s.c.podFailed(ctx, s.pods[protocol.PhaseDeletion], msg, func(msg string) error {
			return s.fail(reasonCleanupFailed, "%s", msg)
		})
	case claimDeletionOrphaned:
		s.event(corev1.EventTypeWarning, reasonCleanupFailed, "%s", msg)
		return s.finish(ctx)
	case claimDeletionRetry:
		return s.fail(reasonCleanupFailed, "%s", msg)
	}
	tmpl, err := s.c.engine.Deletion(ctx, s.p, s.request())
	if err != nil {
		return s.fail(reasonCleanupFailed, "evaluating spec.volumeDeletion of PavProvisioner %q: %v", s.p.Name, err)
	}
	if tmpl == nil {
		return s.finish(ctx)
	}
	return s.runPod(ctx, protocol.PhaseDeletion, tmpl, nil)
}
