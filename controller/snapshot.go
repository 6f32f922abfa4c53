package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Snapshots: for the VolumeSnapshotContents whose spec.driver is a
// PavProvisioner, PaV does what external-snapshotter's csi-snapshotter
// sidecar does for a CSI driver (its sidecar-controller), with a snapshot
// creation pod for CreateSnapshot and a snapshot deletion pod for
// DeleteSnapshot. The snapshot-controller (the common controller) binds
// VolumeSnapshots and contents, creates dynamic contents and marks a content
// for deletion; PaV fills in the content's status and, when the content
// goes, deletes the snapshot and releases the content.

// Well-known names of the external-snapshotter protocol.
const (
	// annSnapshotBeingCreated: on a content while its CreateSnapshot may be
	// in flight (set by the sidecar before it asks, removed once it has an
	// answer); the content is not deleted meanwhile, so a snapshot being
	// cut is not leaked.
	annSnapshotBeingCreated = "snapshot.storage.kubernetes.io/volumesnapshot-being-created"
	// annSnapshotBeingDeleted: set by the snapshot-controller when the
	// sidecar may delete the content's snapshot.
	annSnapshotBeingDeleted = "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"
	// finalizerContentBound is the snapshot-controller's finalizer on
	// contents; the sidecar removes it once the snapshot is deleted (or kept).
	finalizerContentBound = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	// annGroupSnapshotHandle: on the VolumeSnapshotContent the
	// snapshot-controller makes for each volume of a VolumeGroupSnapshot
	// (its value: the group's handle). Such a member's snapshot is cut
	// and deleted with its group's, never on its own.
	annGroupSnapshotHandle = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"
)

// Event reasons on VolumeSnapshotContents, as csi-snapshotter's.
const (
	reasonSnapshotCreationFailed = "SnapshotCreationFailed"
	reasonSnapshotDeleteError    = "SnapshotDeleteError"
	reasonSnapshotCreated        = "SnapshotCreated"
)

// snapshotStep is what a content needs next.
type snapshotStep int

const (
	snapNone               snapshotStep = iota
	snapCreate                          // start an attempt: the creation pod
	snapCreationPod                     // act on the creation pod
	snapStaticReady                     // pre-provisioned: record the handle as ready
	snapRemoveBeingCreated              // ready: drop a leftover being-created annotation
	snapDelete                          // run (or act on) the deletion pod
	snapRelease                         // nothing left to delete: remove the pods, then the finalizer
	snapCleanup                         // pods of a finished attempt are left: remove them
)

// shouldDeleteContent is csi-snapshotter's shouldDelete: the content is
// being deleted, and either it is a pre-provisioned one that was never
// bound, or the snapshot-controller marked it (and no creation is in
// flight).
func shouldDeleteContent(c *snapshotv1.VolumeSnapshotContent) bool {
	if c.DeletionTimestamp == nil {
		return false
	}
	if c.Spec.Source.SnapshotHandle != nil && c.Spec.VolumeSnapshotRef.UID == "" {
		return true
	}
	if _, ok := c.Annotations[annSnapshotBeingCreated]; ok {
		return false
	}
	_, ok := c.Annotations[annSnapshotBeingDeleted]
	return ok
}

// groupMember: the content is one volume's part of a group snapshot.
func groupMember(c *snapshotv1.VolumeSnapshotContent) bool {
	_, ok := c.Annotations[annGroupSnapshotHandle]
	return ok
}

// inGroupSnapshot: the content's snapshot belongs to a group snapshot,
// which deletes it (csi-snapshotter's test: status.volumeGroupSnapshotHandle).
func inGroupSnapshot(c *snapshotv1.VolumeSnapshotContent) bool {
	return c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil
}

func contentReady(c *snapshotv1.VolumeSnapshotContent) bool {
	return c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse
}

// notReadyYet: the content records a snapshot that its creation pod said
// is not ready to use yet (/pav/ready-to-use), with no error.
func notReadyYet(c *snapshotv1.VolumeSnapshotContent) bool {
	return statusHandle(c) != "" && c.Status.ReadyToUse != nil && !*c.Status.ReadyToUse && c.Status.Error == nil
}

func statusHandle(c *snapshotv1.VolumeSnapshotContent) string {
	if c.Status != nil && c.Status.SnapshotHandle != nil {
		return *c.Status.SnapshotHandle
	}
	return ""
}

// decideSnapshot is the next step for a content of a PavProvisioner, given
// its snapshot creation and deletion pods.
func decideSnapshot(c *snapshotv1.VolumeSnapshotContent, pods map[protocol.Phase]*corev1.Pod) snapshotStep {
	if shouldDeleteContent(c) {
		if c.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && statusHandle(c) != "" && !inGroupSnapshot(c) {
			return snapDelete
		}
		return snapRelease
	}
	if pods[protocol.PhaseSnapshotCreation] != nil {
		return snapCreationPod
	}
	switch {
	case groupMember(c):
		// The snapshot-controller records the member's snapshot from its
		// group's status; nothing to cut here.
	case c.Spec.Source.VolumeHandle != nil && statusHandle(c) == "":
		// Even for a content being deleted, as csi-snapshotter: the
		// snapshot-controller marks it for deletion only once no creation
		// may be in flight, and a snapshot cut meanwhile must be recorded
		// to be deleted.
		return snapCreate
	case c.Spec.Source.SnapshotHandle != nil && !contentReady(c):
		return snapStaticReady
	case c.Spec.Source.VolumeHandle != nil && notReadyYet(c):
		// Cut but not usable yet: the creation pod runs again to check.
		return snapCreate
	}
	if _, ok := c.Annotations[annSnapshotBeingCreated]; ok && statusHandle(c) != "" {
		return snapRemoveBeingCreated
	}
	if len(pods) > 0 {
		return snapCleanup
	}
	return snapNone
}

// contentSync is one sync of one VolumeSnapshotContent.
type contentSync struct {
	c       *Controller
	content *snapshotv1.VolumeSnapshotContent
	p       *v1alpha1.PavProvisioner
	pods    map[protocol.Phase]*corev1.Pod
}

func (c *Controller) syncContent(ctx context.Context, name string) error {
	content, err := c.contents.Get(name)
	if apierrors.IsNotFound(err) {
		c.contentBackoff.succeeded(name)
		return nil
	}
	if err != nil {
		return err
	}
	p := c.provisioner(content.Spec.Driver)
	if p == nil {
		return nil // not a PaV snapshot (or its PavProvisioner does not exist yet)
	}
	s := &contentSync{c: c, content: content, p: p, pods: byPhase(c.contentPods(content))}
	for _, pod := range s.pods {
		if protocol.Going(pod) {
			return nil // a previous attempt's pod is still going; its deletion requeues the content
		}
	}
	step := decideSnapshot(content, s.pods)
	// The backoff spaces out retries of failed pods and writes; releasing
	// a deleted content runs no pod, and must not wait for a failed
	// creation's next retry (csi-snapshotter releases it at once).
	if d := c.contentBackoff.wait(name); d > 0 && step != snapRelease {
		c.contentQueue.AddAfter(name, d)
		return nil
	}
	switch step {
	case snapCreate:
		return s.create(ctx)
	case snapCreationPod:
		return s.creationPodState(ctx, s.pods[protocol.PhaseSnapshotCreation])
	case snapStaticReady:
		// No ListSnapshots here: a pre-provisioned snapshot is taken as
		// ready, as csi-snapshotter takes it from a driver without it.
		return s.writeStatus(ctx, func(st *snapshotv1.VolumeSnapshotContentStatus) {
			st.SnapshotHandle = content.Spec.Source.SnapshotHandle
			st.ReadyToUse = ptrTo(true)
			if st.CreationTime == nil {
				st.CreationTime = ptrTo(metav1.Now().UnixNano())
			}
			if st.RestoreSize == nil {
				st.RestoreSize = ptrTo(int64(0))
			}
			st.Error = nil
		})
	case snapRemoveBeingCreated:
		return s.removeBeingCreated(ctx)
	case snapDelete:
		return s.deleteSnapshot(ctx, s.pods[protocol.PhaseSnapshotDeletion])
	case snapRelease:
		if err := s.deletePods(ctx); err != nil {
			return err
		}
		_, err := protocol.RemoveFinalizer(ctx, c.snapshots.SnapshotV1().VolumeSnapshotContents().Patch, content, finalizerContentBound)
		if err != nil {
			return fmt.Errorf("VolumeSnapshotContent %s: %w", content.Name, err)
		}
		return nil
	case snapCleanup:
		return s.deletePods(ctx)
	}
	return nil
}

// contentPods are the snapshot creation and deletion pods of a content.
func (c *Controller) contentPods(content *snapshotv1.VolumeSnapshotContent) []*corev1.Pod {
	return c.podsBy(indexSnapshotContent, protocol.LabelValue(string(content.UID)))
}

func (s *contentSync) event(eventType, reason, format string, args ...interface{}) {
	s.c.recorder.Eventf(s.content, eventType, reason, format, args...)
}

// fail reports a failed creation attempt as csi-snapshotter does (an Event
// and the content's status.error, which the snapshot-controller copies to
// the VolumeSnapshot) and schedules the next attempt with backoff.
func (s *contentSync) fail(ctx context.Context, format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reasonSnapshotCreationFailed, "Failed to create snapshot: %s", msg)
	if err := s.writeStatus(ctx, func(st *snapshotv1.VolumeSnapshotContentStatus) {
		st.Error = &snapshotv1.VolumeSnapshotError{Time: ptrTo(metav1.Now()), Message: ptrTo("Failed to create snapshot: " + msg)}
		if st.ReadyToUse == nil {
			st.ReadyToUse = ptrTo(false)
		}
	}); err != nil {
		return err
	}
	return s.retryLater(msg)
}

func (s *contentSync) retryLater(msg string) error {
	d := s.c.contentBackoff.failed(s.content.Name)
	s.c.contentQueue.AddAfter(s.content.Name, d)
	return retryScheduled{fmt.Errorf("VolumeSnapshotContent %s: %s (retrying in %v)", s.content.Name, msg, d)}
}

// errSnapshotClassGone: the content names a VolumeSnapshotClass that does
// not exist. A creation then fails, as csi-snapshotter's does (the class's
// parameters say how to take the snapshot); a deletion goes on without them.
var errSnapshotClassGone = errors.New("VolumeSnapshotClass not found")

// request gathers the snapshot phases' context: the VolumeSnapshot, the
// class's parameters, the volume and its claim (each nil if gone; a class
// gone is errSnapshotClassGone, with the request made without it).
func (s *contentSync) request(ctx context.Context) (templating.SnapshotRequest, error) {
	r := templating.SnapshotRequest{Content: s.content}
	api := s.c.snapshots.SnapshotV1()
	if ref := s.content.Spec.VolumeSnapshotRef; ref.Name != "" {
		snap, err := api.VolumeSnapshots(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil && snap.UID == ref.UID:
			r.Snapshot = snap
		case err != nil && !apierrors.IsNotFound(err):
			return r, fmt.Errorf("reading VolumeSnapshot %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	var classGone error
	if n := s.content.Spec.VolumeSnapshotClassName; n != nil && *n != "" {
		class, err := api.VolumeSnapshotClasses().Get(ctx, *n, metav1.GetOptions{})
		switch {
		case err == nil:
			r.ClassParameters = class.Parameters
		case apierrors.IsNotFound(err):
			classGone = fmt.Errorf("%w: %s", errSnapshotClassGone, *n)
		default:
			return r, fmt.Errorf("reading VolumeSnapshotClass %s: %w", *n, err)
		}
	}
	if h := s.content.Spec.Source.VolumeHandle; h != nil {
		r.PV = s.c.volumeByHandle(s.content.Spec.Driver, *h)
		if r.PV != nil && r.PV.Spec.ClaimRef != nil {
			if pvc, err := s.c.claims.PersistentVolumeClaims(r.PV.Spec.ClaimRef.Namespace).Get(r.PV.Spec.ClaimRef.Name); err == nil && pvc.UID == r.PV.Spec.ClaimRef.UID {
				r.PVC = pvc
			}
		}
	}
	return r, classGone
}

// volumeByHandle is the PV of driver with that volume handle, nil if none.
func (c *Controller) volumeByHandle(driver, handle string) *corev1.PersistentVolume {
	objs, _ := c.pvIndexer.ByIndex(indexCSIDriver, driver)
	for _, o := range objs {
		if pv, ok := o.(*corev1.PersistentVolume); ok && pv.Spec.CSI.VolumeHandle == handle {
			return pv
		}
	}
	return nil
}

// create starts an attempt: the creation pod, after marking the content
// being created (as csi-snapshotter does before CreateSnapshot).
func (s *contentSync) create(ctx context.Context) error {
	// About to run the creation pod, on the API server's word only: the
	// contents' watch can lag the pods' one, so the cache may still show
	// the content without the handle the last creation pod recorded while
	// that pod is gone already; a second pod would cut a second snapshot
	// and the first would leak. A cache behind is caught up by the watch,
	// which requeues the content.
	live, err := s.c.snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, s.content.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VolumeSnapshotContent %s: %w", s.content.Name, err)
	}
	if decideSnapshot(live, s.pods) != snapCreate {
		return nil
	}
	s.content = live
	if s.content.Spec.Source.VolumeHandle != nil && s.c.volumeByHandle(s.p.Name, *s.content.Spec.Source.VolumeHandle) == nil {
		return s.fail(ctx, "no PersistentVolume of PavProvisioner %q has the volume handle %q", s.p.Name, *s.content.Spec.Source.VolumeHandle)
	}
	req, err := s.request(ctx)
	if errors.Is(err, errSnapshotClassGone) {
		return s.fail(ctx, "%v", err)
	}
	if err != nil {
		return err
	}
	tmpl, ok, err := s.c.engine.SnapshotCreation(ctx, s.p, req)
	switch {
	case !ok:
		return s.fail(ctx, "PavProvisioner %q cannot take snapshots (it has no spec.snapshotCreation)", s.p.Name)
	case err != nil:
		return s.fail(ctx, "evaluating spec.snapshotCreation of PavProvisioner %q: %v", s.p.Name, err)
	}
	// A re-check of a recorded snapshot cuts nothing that could leak.
	if _, ok := s.content.Annotations[annSnapshotBeingCreated]; !ok && statusHandle(s.content) == "" {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"yes"}}}`, annSnapshotBeingCreated)
		if _, err := s.c.snapshots.SnapshotV1().VolumeSnapshotContents().Patch(ctx, s.content.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("VolumeSnapshotContent %s: marking it being created: %w", s.content.Name, err)
		}
	}
	pod := protocol.SnapshotPod(tmpl, s.p.Name, s.c.podDirRoot(), protocol.PhaseSnapshotCreation, s.content.Name, string(s.content.UID))
	squatter, err := s.c.createPod(ctx, pod)
	if squatter != nil {
		s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, protocol.PhaseSnapshotCreation))
	}
	return err
}

// creationPodState acts on the creation pod once it is done: its results
// go into the content's status, then the being-created mark and the pod go.
// A pod that re-checked a snapshot not ready yet updates its readiness; a
// snapshot still not ready is checked again after a backoff.
func (s *contentSync) creationPodState(ctx context.Context, pod *corev1.Pod) error {
	r, ok := s.c.finishedPod(ctx, pod, podWaiter{obj: s.content, queue: s.c.contentQueue, key: s.content.Name})
	if !ok {
		return nil
	}
	recorded := statusHandle(s.content)
	wasReady := contentReady(s.content)
	if !r.succeeded {
		if recorded == "" {
			return s.failedAttempt(ctx, pod, r.message)
		}
		// A failed re-check leaves the recorded snapshot as it is.
		s.event(corev1.EventTypeWarning, reasonSnapshotCreationFailed, "checking whether snapshot %q is ready: %s", recorded, r.message)
		return s.checkAgain(ctx, pod)
	}
	res, problem := snapshotResults(pod, recorded)
	if res.handle == "" {
		return s.failedAttempt(ctx, pod, problem)
	}
	ready := problem == "" && res.ready
	// A handle that is valid is recorded even if the rest is not, so
	// that the snapshot can be deleted; it is then not ready.
	if err := s.writeStatus(ctx, func(st *snapshotv1.VolumeSnapshotContentStatus) {
		st.SnapshotHandle = &res.handle
		if st.CreationTime == nil {
			st.CreationTime = ptrTo(terminationTime(pod).UnixNano())
		}
		if res.restoreSize != nil {
			st.RestoreSize = res.restoreSize
		} else if st.RestoreSize == nil {
			st.RestoreSize = ptrTo(int64(0))
		}
		st.ReadyToUse = ptrTo(ready)
		st.Error = nil
		if problem != "" {
			st.Error = &snapshotv1.VolumeSnapshotError{Time: ptrTo(metav1.Now()), Message: ptrTo(problem)}
		}
	}); err != nil {
		return err
	}
	switch {
	case problem != "":
		s.event(corev1.EventTypeWarning, reasonSnapshotCreationFailed, "%s", problem)
	case ready && !wasReady:
		s.event(corev1.EventTypeNormal, reasonSnapshotCreated, "Snapshot %q of volume %q created by pod %s/%s", res.handle, ptrString(s.content.Spec.Source.VolumeHandle), pod.Namespace, pod.Name)
	case !ready && recorded == "":
		s.event(corev1.EventTypeNormal, reasonSnapshotCreated, "Snapshot %q of volume %q cut by pod %s/%s, not ready to use yet: PaV checks again later", res.handle, ptrString(s.content.Spec.Source.VolumeHandle), pod.Namespace, pod.Name)
	}
	if err := s.removeBeingCreated(ctx); err != nil {
		return err
	}
	if !ready && problem == "" {
		return s.checkAgain(ctx, pod)
	}
	s.c.contentBackoff.succeeded(s.content.Name)
	return s.c.deletePod(ctx, pod)
}

// checkAgain ends a look at a snapshot that is not ready yet: the pod goes
// and the creation pod runs again after a backoff.
func (s *contentSync) checkAgain(ctx context.Context, pod *corev1.Pod) error {
	if err := s.c.deletePod(ctx, pod); err != nil {
		return err
	}
	d := s.c.contentBackoff.failed(s.content.Name)
	s.c.contentQueue.AddAfter(s.content.Name, d)
	return nil
}

// failedAttempt ends an attempt whose pod failed or wrote no usable handle:
// status and Event, then the mark and the pod go, and the next attempt
// waits for its backoff.
func (s *contentSync) failedAttempt(ctx context.Context, pod *corev1.Pod, msg string) error {
	if err := s.fail(ctx, "%s", msg); !isRetryScheduled(err) {
		return err
	}
	if err := s.removeBeingCreated(ctx); err != nil {
		return err
	}
	if err := s.c.deletePod(ctx, pod); err != nil {
		return err
	}
	return retryScheduled{fmt.Errorf("VolumeSnapshotContent %s: %s", s.content.Name, msg)}
}

type snapshotResult struct {
	handle      string
	restoreSize *int64 // nil: the pod wrote none
	ready       bool
}

// snapshotResults reads a succeeded creation pod's /pav files; recorded is
// the handle the content's status already has ("" for none), which a pod
// re-checking the snapshot need not write again. handle is "" if there is
// none that PaV accepts; problem says what is wrong.
func snapshotResults(pod *corev1.Pod, recorded string) (res snapshotResult, problem string) {
	ann := pod.Annotations
	res.handle = recorded
	switch h := strings.TrimSpace(ann[protocol.AnnotationResultSnapshotHandle]); {
	case h == "" && recorded == "":
		return res, fmt.Sprintf("the snapshot creation pod %s/%s succeeded but wrote no /pav/%s", pod.Namespace, pod.Name, protocol.FileSnapshotHandle)
	case h == "":
	case recorded != "" && h != recorded:
		return res, fmt.Sprintf("the snapshot creation pod %s/%s wrote /pav/%s %q, but the snapshot is %q", pod.Namespace, pod.Name, protocol.FileSnapshotHandle, h, recorded)
	default:
		if err := protocol.CheckHandle(h); err != nil {
			return res, fmt.Sprintf("the snapshot creation pod %s/%s wrote an invalid /pav/%s: %v", pod.Namespace, pod.Name, protocol.FileSnapshotHandle, err)
		}
		res.handle = h
	}
	if raw, ok := ann[protocol.AnnotationResultRestoreSize]; ok {
		n, err := parseBytes(strings.TrimSpace(raw))
		if err != nil {
			return res, fmt.Sprintf("the snapshot creation pod %s/%s wrote an invalid /pav/%s: %v", pod.Namespace, pod.Name, protocol.FileRestoreSize, err)
		}
		res.restoreSize = &n
	}
	switch v := strings.TrimSpace(ann[protocol.AnnotationResultReadyToUse]); v {
	case "", "true":
		res.ready = true
	case "false":
	default:
		return res, fmt.Sprintf("the snapshot creation pod %s/%s wrote %q to /pav/%s: write true or false", pod.Namespace, pod.Name, v, protocol.FileReadyToUse)
	}
	return res, ""
}

// parseBytes reads a size: a number of bytes or a quantity (10Gi).
func parseBytes(s string) (int64, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return n, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number of bytes or a quantity", s)
	}
	return templating.Bytes(q)
}

// deleteSnapshot runs the deletion pod (if the provisioner has one) and,
// once it succeeded, clears the snapshot from the content's status, as
// csi-snapshotter does after DeleteSnapshot; the next sync releases the content.
func (s *contentSync) deleteSnapshot(ctx context.Context, pod *corev1.Pod) error {
	clear := func() error {
		return s.writeStatus(ctx, func(st *snapshotv1.VolumeSnapshotContentStatus) {
			st.SnapshotHandle, st.ReadyToUse, st.CreationTime, st.RestoreSize = nil, nil, nil, nil
		})
	}
	if pod == nil {
		req, err := s.request(ctx)
		if err != nil && !errors.Is(err, errSnapshotClassGone) {
			return err
		}
		tmpl, err := s.c.engine.SnapshotDeletion(ctx, s.p, req)
		if err != nil {
			return s.deleteFailed("evaluating spec.snapshotDeletion of PavProvisioner %q: %v", s.p.Name, err)
		}
		if tmpl == nil {
			return clear()
		}
		squatter, err := s.c.createPod(ctx, protocol.SnapshotPod(tmpl, s.p.Name, s.c.podDirRoot(), protocol.PhaseSnapshotDeletion, s.content.Name, string(s.content.UID)))
		if squatter != nil {
			s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, protocol.PhaseSnapshotDeletion))
		}
		return err
	}
	r, ok := s.c.finishedPod(ctx, pod, podWaiter{obj: s.content, queue: s.c.contentQueue, key: s.content.Name})
	if !ok {
		return nil
	}
	if !r.succeeded {
		return s.c.podFailed(ctx, pod, r.message, func(msg string) error { return s.deleteFailed("%s", msg) })
	}
	s.c.contentBackoff.succeeded(s.content.Name)
	return clear() // the pod goes with the release
}

func (s *contentSync) deleteFailed(format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reasonSnapshotDeleteError, "Failed to delete snapshot: %s", msg)
	return s.retryLater(msg)
}

// deletePods removes the content's pods (their outcome has been acted on).
func (s *contentSync) deletePods(ctx context.Context) error {
	for _, pod := range s.pods {
		if err := s.c.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// writeStatus changes the content's status (on the version read; a
// conflict retries the sync) unless the change changes nothing.
func (s *contentSync) writeStatus(ctx context.Context, change func(*snapshotv1.VolumeSnapshotContentStatus)) error {
	updated := s.content.DeepCopy()
	if updated.Status == nil {
		updated.Status = &snapshotv1.VolumeSnapshotContentStatus{}
	}
	change(updated.Status)
	if s.content.Status != nil && equalStatus(s.content.Status, updated.Status) {
		return nil
	}
	got, err := s.c.snapshots.SnapshotV1().VolumeSnapshotContents().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("VolumeSnapshotContent %s: updating its status: %w", s.content.Name, err)
	}
	klog.V(2).InfoS("VolumeSnapshotContent status updated", "content", s.content.Name, "handle", ptrString(got.Status.SnapshotHandle), "ready", got.Status.ReadyToUse != nil && *got.Status.ReadyToUse)
	s.content = got
	return nil
}

// equalStatus compares statuses ignoring the time of an error (a repeated
// failure with the same message is not news).
func equalStatus(a, b *snapshotv1.VolumeSnapshotContentStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, st := range []*snapshotv1.VolumeSnapshotContentStatus{a, b} {
		if st.Error != nil {
			st.Error.Time = nil
		}
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func (s *contentSync) removeBeingCreated(ctx context.Context) error {
	if _, ok := s.content.Annotations[annSnapshotBeingCreated]; !ok {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, annSnapshotBeingCreated)
	got, err := s.c.snapshots.SnapshotV1().VolumeSnapshotContents().Patch(ctx, s.content.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("VolumeSnapshotContent %s: removing annotation %s: %w", s.content.Name, annSnapshotBeingCreated, err)
	}
	s.content = got
	return nil
}

func ptrTo[T any](v T) *T { return &v }

func isRetryScheduled(err error) bool {
	var r retryScheduled
	return errors.As(err, &r)
}
