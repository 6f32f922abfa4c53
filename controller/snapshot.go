package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// actOnCreationPod: a content's creation pod is acted on (waited for, its
// results recorded) before anything else, even once the content should be
// deleted. The snapshot-controller marks a content for deletion without
// looking at the being-created mark, and its patch of the annotations (a
// replace of them all, as its cache has them) can even drop that mark while
// the pod runs; the snapshot the pod cuts must be recorded to be deleted.
// Only a pod no node has taken is deleted with the content: it cut nothing.
func actOnCreationPod(pod *corev1.Pod, contentDeleted bool) bool {
	return pod != nil && (!contentDeleted || pod.Spec.NodeName != "")
}

// decideSnapshot is the next step for a content of a PavProvisioner, given
// its snapshot creation and deletion pods.
func decideSnapshot(c *snapshotv1.VolumeSnapshotContent, pods map[protocol.Phase]*corev1.Pod) snapshotStep {
	deleting := shouldDeleteContent(c)
	if actOnCreationPod(pods[protocol.PhaseSnapshotCreation], deleting) {
		return snapCreationPod
	}
	if deleting {
		if c.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && statusHandle(c) != "" && !inGroupSnapshot(c) {
			return snapDelete
		}
		return snapRelease
	}
	switch {
	case groupMember(c):
		// The snapshot-controller records the member's snapshot from its
		// group's status; nothing to cut here.
	case c.Spec.Source.VolumeHandle != nil && statusHandle(c) == "":
		// Even for a content being deleted, as csi-snapshotter: while it
		// is marked being created it is not deleted, and a snapshot cut
		// meanwhile must be recorded to be deleted.
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

// snapshotContents is the VolumeSnapshotContent kind of podContent.
var snapshotContents = contentKind[*snapshotv1.VolumeSnapshotContent, snapshotv1.VolumeSnapshotContentStatus]{
	resource: "VolumeSnapshotContent", what: "snapshot",
	annBeingCreated: annSnapshotBeingCreated, finalizer: finalizerContentBound,
	reasonCreationFailed: reasonSnapshotCreationFailed, reasonDeleteError: reasonSnapshotDeleteError,
	creation: protocol.PhaseSnapshotCreation, deletion: protocol.PhaseSnapshotDeletion,
	pod:    protocol.SnapshotPod,
	driver: func(c *snapshotv1.VolumeSnapshotContent) string { return c.Spec.Driver },
	handle: statusHandle,
	ready:  contentReady,
	status: func(c *snapshotv1.VolumeSnapshotContent) *snapshotv1.VolumeSnapshotContentStatus {
		if c.Status == nil {
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{}
		}
		return c.Status
	},
	failed: func(st *snapshotv1.VolumeSnapshotContentStatus, e *snapshotv1.VolumeSnapshotError) {
		st.Error = e
		if st.ReadyToUse == nil {
			st.ReadyToUse = ptrTo(false)
		}
	},
}

// contentSync is one sync of one VolumeSnapshotContent.
type contentSync struct {
	podContent[*snapshotv1.VolumeSnapshotContent, snapshotv1.VolumeSnapshotContentStatus]
}

func (c *Controller) syncContent(ctx context.Context, name string) error {
	s := &contentSync{newPodContent(c, &snapshotContents, c.snapshots.SnapshotV1().VolumeSnapshotContents(), c.contentQueue, c.contentBackoff)}
	if ok, err := s.open(name, c.contents.Get); !ok {
		return err
	}
	step := decideSnapshot(s.content, s.pods)
	if s.backingOff(step == snapRelease) {
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
			st.SnapshotHandle = s.content.Spec.Source.SnapshotHandle
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
		return s.release(ctx)
	case snapCleanup:
		return s.deletePods(ctx)
	}
	return nil
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
	if ok, err := s.reread(ctx, func(live *snapshotv1.VolumeSnapshotContent) bool { return decideSnapshot(live, s.pods) == snapCreate }); !ok {
		return err
	}
	if h := s.content.Spec.Source.VolumeHandle; h != nil && s.c.volumeByHandle(s.p.Name, *h) == nil {
		return s.fail(ctx, "no PersistentVolume of PavProvisioner %q has the volume handle %q", s.p.Name, *h)
	}
	req, err := s.request(ctx)
	if errors.Is(err, errSnapshotClassGone) {
		return s.fail(ctx, "%v", err)
	}
	if err != nil {
		return err
	}
	tmpl, ok, err := s.c.engine.SnapshotCreation(ctx, s.p, req)
	return s.startCreation(ctx, "snapshotCreation", tmpl, ok, err)
}

// creationPodState acts on the creation pod once it is done: its results
// go into the content's status, then the being-created mark and the pod go.
// A pod that re-checked a snapshot not ready yet updates its readiness; a
// snapshot still not ready is checked again after a backoff.
func (s *contentSync) creationPodState(ctx context.Context, pod *corev1.Pod) error {
	r, ok := s.finishedPod(ctx, pod)
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
	s.backoff.succeeded(s.content.Name)
	return s.c.deletePod(ctx, pod)
}

// checkAgain ends a look at a snapshot that is not ready yet: the pod goes
// and the creation pod runs again after a backoff.
func (s *contentSync) checkAgain(ctx context.Context, pod *corev1.Pod) error {
	if err := s.c.deletePod(ctx, pod); err != nil {
		return err
	}
	d := s.backoff.failed(s.content.Name)
	s.queue.AddAfter(s.content.Name, d)
	return nil
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
// csi-snapshotter does after DeleteSnapshot.
func (s *contentSync) deleteSnapshot(ctx context.Context, pod *corev1.Pod) error {
	return s.podContent.deleteSnapshot(ctx, pod, func() (*corev1.PodTemplateSpec, error) {
		req, err := s.request(ctx)
		if err != nil && !errors.Is(err, errSnapshotClassGone) {
			return nil, err
		}
		tmpl, err := s.c.engine.SnapshotDeletion(ctx, s.p, req)
		if err != nil {
			return nil, s.deleteFailed("evaluating spec.snapshotDeletion of PavProvisioner %q: %v", s.p.Name, err)
		}
		return tmpl, nil
	}, func(st *snapshotv1.VolumeSnapshotContentStatus) {
		st.SnapshotHandle, st.ReadyToUse, st.CreationTime, st.RestoreSize = nil, nil, nil, nil
	})
}

func ptrTo[T any](v T) *T { return &v }

func isRetryScheduled(err error) bool {
	var r retryScheduled
	return errors.As(err, &r)
}
