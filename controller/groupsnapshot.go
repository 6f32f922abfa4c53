package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

// Group snapshots: for the VolumeGroupSnapshotContents whose spec.driver is
// a PavProvisioner, PaV does what csi-snapshotter's group side does for a
// CSI driver, with a group snapshot creation pod for
// CreateVolumeGroupSnapshot and a group snapshot deletion pod for
// DeleteVolumeGroupSnapshot. The snapshot-controller creates the dynamic
// contents (spec.source.volumeHandles) and, once PaV recorded the group's
// and each volume's snapshot handle in the content's status, a
// VolumeSnapshot and VolumeSnapshotContent per volume (members: snapshot.go
// cuts and deletes nothing for them). A member restores as any snapshot.

// Well-known names of the external-snapshotter group protocol.
const (
	annGroupSnapshotBeingCreated = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"
	annGroupSnapshotBeingDeleted = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted"
	// finalizerGroupContentBound: the snapshot-controller's, removed by
	// the sidecar once the group snapshot is deleted (or kept).
	finalizerGroupContentBound = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"
)

// Event reasons on VolumeGroupSnapshotContents, as csi-snapshotter's (and
// GroupSnapshotCreated for a success, as for snapshots).
const (
	reasonGroupSnapshotCreationFailed = "GroupSnapshotCreationFailed"
	reasonGroupSnapshotDeleteError    = "GroupSnapshotDeleteError"
	reasonGroupSnapshotCreated        = "GroupSnapshotCreated"
)

type groupStep int

const (
	groupNone               groupStep = iota
	groupCreate                       // start an attempt: the creation pod
	groupCreationPod                  // act on the creation pod
	groupStaticReady                  // pre-provisioned: record its handles as ready
	groupRemoveBeingCreated           // ready: drop a leftover being-created annotation
	groupDelete                       // run (or act on) the deletion pod
	groupRelease                      // nothing left to delete: remove the pods, then the finalizer
	groupCleanup                      // pods of a finished attempt are left: remove them
)

// shouldDeleteGroupContent is csi-snapshotter's shouldDeleteGroupSnapshotContent.
func shouldDeleteGroupContent(c *groupsnapshotv1.VolumeGroupSnapshotContent) bool {
	if c.DeletionTimestamp == nil {
		return false
	}
	if c.Spec.Source.GroupSnapshotHandles != nil && c.Spec.VolumeGroupSnapshotRef.UID == "" {
		return true
	}
	if _, ok := c.Annotations[annGroupSnapshotBeingCreated]; ok {
		return false
	}
	_, ok := c.Annotations[annGroupSnapshotBeingDeleted]
	return ok
}

func groupContentReady(c *groupsnapshotv1.VolumeGroupSnapshotContent) bool {
	return c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse
}

func statusGroupHandle(c *groupsnapshotv1.VolumeGroupSnapshotContent) string {
	if c.Status != nil && c.Status.VolumeGroupSnapshotHandle != nil {
		return *c.Status.VolumeGroupSnapshotHandle
	}
	return ""
}

// decideGroupSnapshot is the next step for a group content of a
// PavProvisioner, given its group snapshot creation and deletion pods.
func decideGroupSnapshot(c *groupsnapshotv1.VolumeGroupSnapshotContent, pods map[protocol.Phase]*corev1.Pod) groupStep {
	if shouldDeleteGroupContent(c) {
		if c.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && statusGroupHandle(c) != "" {
			return groupDelete
		}
		return groupRelease
	}
	if pods[protocol.PhaseGroupSnapshotCreation] != nil {
		return groupCreationPod
	}
	switch {
	case len(c.Spec.Source.VolumeHandles) > 0 && statusGroupHandle(c) == "":
		// Even while being deleted, as for snapshots: a group cut
		// meanwhile must be recorded to be deleted.
		return groupCreate
	case c.Spec.Source.GroupSnapshotHandles != nil && !groupContentReady(c):
		return groupStaticReady
	}
	if _, ok := c.Annotations[annGroupSnapshotBeingCreated]; ok && statusGroupHandle(c) != "" {
		return groupRemoveBeingCreated
	}
	if len(pods) > 0 {
		return groupCleanup
	}
	return groupNone
}

// groupSync is one sync of one VolumeGroupSnapshotContent.
type groupSync struct {
	c       *Controller
	content *groupsnapshotv1.VolumeGroupSnapshotContent
	p       *v1alpha1.PavProvisioner
	pods    map[protocol.Phase]*corev1.Pod
}

func (c *Controller) syncGroupContent(ctx context.Context, name string) error {
	content, err := c.groupContents.Get(name)
	if apierrors.IsNotFound(err) {
		c.groupContentBackoff.succeeded(name)
		return nil
	}
	if err != nil {
		return err
	}
	p := c.provisioner(content.Spec.Driver)
	if p == nil {
		return nil // not a PaV group snapshot (or its PavProvisioner does not exist yet)
	}
	s := &groupSync{c: c, content: content, p: p,
		pods: byPhase(c.podsBy(indexSnapshotContent, protocol.LabelValue(string(content.UID))))}
	for _, pod := range s.pods {
		if protocol.Going(pod) {
			return nil // a previous attempt's pod is still going; its deletion requeues the content
		}
	}
	step := decideGroupSnapshot(content, s.pods)
	// The backoff spaces out retries of failed pods and writes; releasing
	// a deleted content runs no pod, and must not wait for a failed
	// creation's next retry (csi-snapshotter releases it at once).
	if d := c.groupContentBackoff.wait(name); d > 0 && step != groupRelease {
		c.groupContentQueue.AddAfter(name, d)
		return nil
	}
	switch step {
	case groupCreate:
		return s.create(ctx)
	case groupCreationPod:
		return s.creationPodState(ctx, s.pods[protocol.PhaseGroupSnapshotCreation])
	case groupStaticReady:
		// As csi-snapshotter with a driver without GetVolumeGroupSnapshot:
		// a pre-provisioned group is taken as ready.
		return s.writeStatus(ctx, func(st *groupsnapshotv1.VolumeGroupSnapshotContentStatus) {
			st.VolumeGroupSnapshotHandle = &content.Spec.Source.GroupSnapshotHandles.VolumeGroupSnapshotHandle
			st.ReadyToUse = ptrTo(true)
			if st.CreationTime == nil {
				st.CreationTime = ptrTo(metav1.Now())
			}
			st.Error = nil
		})
	case groupRemoveBeingCreated:
		return s.removeBeingCreated(ctx)
	case groupDelete:
		return s.deleteGroup(ctx, s.pods[protocol.PhaseGroupSnapshotDeletion])
	case groupRelease:
		if err := s.deletePods(ctx); err != nil {
			return err
		}
		_, err := protocol.RemoveFinalizer(ctx, c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch, content, finalizerGroupContentBound)
		if err != nil {
			return fmt.Errorf("VolumeGroupSnapshotContent %s: %w", content.Name, err)
		}
		return nil
	case groupCleanup:
		return s.deletePods(ctx)
	}
	return nil
}

func (s *groupSync) event(eventType, reason, format string, args ...interface{}) {
	s.c.recorder.Eventf(s.content, eventType, reason, format, args...)
}

// fail reports a failed creation attempt as csi-snapshotter does (an Event
// and status.error, which the snapshot-controller copies to the
// VolumeGroupSnapshot) and schedules the next attempt with backoff.
func (s *groupSync) fail(ctx context.Context, format string, args ...interface{}) error {
	msg := "Failed to create group snapshot: " + fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reasonGroupSnapshotCreationFailed, "%s", msg)
	if err := s.writeStatus(ctx, func(st *groupsnapshotv1.VolumeGroupSnapshotContentStatus) {
		st.Error = &snapshotv1.VolumeSnapshotError{Time: ptrTo(metav1.Now()), Message: ptrTo(msg)}
		st.ReadyToUse = ptrTo(false)
	}); err != nil {
		return err
	}
	return s.retryLater(msg)
}

func (s *groupSync) retryLater(msg string) error {
	d := s.c.groupContentBackoff.failed(s.content.Name)
	s.c.groupContentQueue.AddAfter(s.content.Name, d)
	return retryScheduled{fmt.Errorf("VolumeGroupSnapshotContent %s: %s (retrying in %v)", s.content.Name, msg, d)}
}

// request gathers the group phases' context: the VolumeGroupSnapshot, the
// class's parameters and the volumes (each nil if gone; a class gone is
// errSnapshotClassGone, with the request made without it).
func (s *groupSync) request(ctx context.Context) (templating.GroupSnapshotRequest, error) {
	r := templating.GroupSnapshotRequest{Content: s.content}
	api := s.c.snapshots.GroupsnapshotV1()
	if ref := s.content.Spec.VolumeGroupSnapshotRef; ref.Name != "" {
		gs, err := api.VolumeGroupSnapshots(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil && gs.UID == ref.UID:
			r.GroupSnapshot = gs
		case err != nil && !apierrors.IsNotFound(err):
			return r, fmt.Errorf("reading VolumeGroupSnapshot %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	for _, h := range templating.GroupVolumeHandles(s.content) {
		r.PVs = append(r.PVs, s.c.volumeByHandle(s.content.Spec.Driver, h))
	}
	if n := s.content.Spec.VolumeGroupSnapshotClassName; n != nil && *n != "" {
		class, err := api.VolumeGroupSnapshotClasses().Get(ctx, *n, metav1.GetOptions{})
		switch {
		case err == nil:
			r.ClassParameters = class.Parameters
		case apierrors.IsNotFound(err):
			return r, fmt.Errorf("%w: VolumeGroupSnapshotClass %s", errSnapshotClassGone, *n)
		default:
			return r, fmt.Errorf("reading VolumeGroupSnapshotClass %s: %w", *n, err)
		}
	}
	return r, nil
}

// create starts an attempt: the creation pod, after marking the content
// being created (as csi-snapshotter does before CreateVolumeGroupSnapshot).
func (s *groupSync) create(ctx context.Context) error {
	// On the API server's word only, as for snapshots (snapshot.go's
	// create): a cache behind could run a second pod and leak a group.
	live, err := s.c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, s.content.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VolumeGroupSnapshotContent %s: %w", s.content.Name, err)
	}
	if decideGroupSnapshot(live, s.pods) != groupCreate {
		return nil
	}
	s.content = live
	if n := s.content.Spec.VolumeGroupSnapshotClassName; n == nil || *n == "" {
		return s.fail(ctx, "a dynamic group snapshot needs a VolumeGroupSnapshotClass")
	}
	for _, h := range s.content.Spec.Source.VolumeHandles {
		if s.c.volumeByHandle(s.p.Name, h) == nil {
			return s.fail(ctx, "no PersistentVolume of PavProvisioner %q has the volume handle %q", s.p.Name, h)
		}
	}
	req, err := s.request(ctx)
	if errors.Is(err, errSnapshotClassGone) {
		return s.fail(ctx, "%v", err)
	}
	if err != nil {
		return err
	}
	tmpl, ok, err := s.c.engine.GroupSnapshotCreation(ctx, s.p, req)
	switch {
	case !ok:
		return s.fail(ctx, "PavProvisioner %q cannot take group snapshots (it has no spec.groupSnapshotCreation)", s.p.Name)
	case err != nil:
		return s.fail(ctx, "evaluating spec.groupSnapshotCreation of PavProvisioner %q: %v", s.p.Name, err)
	}
	if _, ok := s.content.Annotations[annGroupSnapshotBeingCreated]; !ok {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"yes"}}}`, annGroupSnapshotBeingCreated)
		if _, err := s.c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch(ctx, s.content.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("VolumeGroupSnapshotContent %s: marking it being created: %w", s.content.Name, err)
		}
	}
	pod := protocol.GroupSnapshotPod(tmpl, s.p.Name, s.c.podDirRoot(), protocol.PhaseGroupSnapshotCreation, s.content.Name, string(s.content.UID))
	squatter, err := s.c.createPod(ctx, pod)
	if squatter != nil {
		s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, protocol.PhaseGroupSnapshotCreation))
	}
	return err
}

// creationPodState acts on the creation pod once it is done: its results
// go into the content's status (the group's handle and each volume's
// snapshot), then the being-created mark and the pod go.
func (s *groupSync) creationPodState(ctx context.Context, pod *corev1.Pod) error {
	r, ok := s.c.finishedPod(ctx, pod, podWaiter{obj: s.content, queue: s.c.groupContentQueue, key: s.content.Name})
	if !ok {
		return nil
	}
	if !r.succeeded {
		return s.failedAttempt(ctx, pod, r.message)
	}
	group, members, problem := groupSnapshotResults(pod, s.content.Spec.Source.VolumeHandles)
	if group == "" {
		return s.failedAttempt(ctx, pod, problem)
	}
	created := metav1.NewTime(terminationTime(pod))
	// A valid group handle is recorded even if the rest is not, so that
	// the group can be deleted; it is then not ready, and without members
	// the snapshot-controller makes no VolumeSnapshots of it.
	if err := s.writeStatus(ctx, func(st *groupsnapshotv1.VolumeGroupSnapshotContentStatus) {
		st.VolumeGroupSnapshotHandle = &group
		st.ReadyToUse = ptrTo(problem == "")
		if st.CreationTime == nil {
			st.CreationTime = &created
		}
		st.Error = nil
		if problem != "" {
			st.Error = &snapshotv1.VolumeSnapshotError{Time: ptrTo(metav1.Now()), Message: ptrTo(problem)}
			return
		}
		st.VolumeSnapshotInfoList = nil
		for _, m := range members {
			st.VolumeSnapshotInfoList = append(st.VolumeSnapshotInfoList, groupsnapshotv1.VolumeSnapshotInfo{
				VolumeHandle: m.VolumeHandle, SnapshotHandle: m.SnapshotHandle,
				CreationTime: ptrTo(created.UnixNano()), ReadyToUse: ptrTo(true), RestoreSize: m.restoreSize,
			})
		}
	}); err != nil {
		return err
	}
	if problem != "" {
		s.event(corev1.EventTypeWarning, reasonGroupSnapshotCreationFailed, "%s", problem)
	} else {
		s.event(corev1.EventTypeNormal, reasonGroupSnapshotCreated, "Group snapshot %q of %d volume(s) created by pod %s/%s", group, len(members), pod.Namespace, pod.Name)
	}
	if err := s.removeBeingCreated(ctx); err != nil {
		return err
	}
	s.c.groupContentBackoff.succeeded(s.content.Name)
	return s.c.deletePod(ctx, pod)
}

// failedAttempt ends an attempt whose pod failed or wrote no usable group
// handle: status and Event, then the mark and the pod go, and the next
// attempt waits for its backoff.
func (s *groupSync) failedAttempt(ctx context.Context, pod *corev1.Pod, msg string) error {
	if err := s.fail(ctx, "%s", msg); !isRetryScheduled(err) {
		return err
	}
	if err := s.removeBeingCreated(ctx); err != nil {
		return err
	}
	if err := s.c.deletePod(ctx, pod); err != nil {
		return err
	}
	return retryScheduled{fmt.Errorf("VolumeGroupSnapshotContent %s: %s", s.content.Name, msg)}
}

type memberResult struct {
	protocol.MemberSnapshot
	restoreSize *int64
}

// groupSnapshotResults reads a succeeded group creation pod's /pav files:
// the group's handle ("" if PaV accepts none) and each of volumes'
// snapshot; problem says what is wrong.
func groupSnapshotResults(pod *corev1.Pod, volumes []string) (group string, members []memberResult, problem string) {
	ann := pod.Annotations
	where := fmt.Sprintf("the group snapshot creation pod %s/%s", pod.Namespace, pod.Name)
	group = strings.TrimSpace(ann[protocol.AnnotationResultSnapshotHandle])
	if group == "" {
		return "", nil, fmt.Sprintf("%s succeeded but wrote no /pav/%s", where, protocol.FileSnapshotHandle)
	}
	if err := protocol.CheckHandle(group); err != nil {
		return "", nil, fmt.Sprintf("%s wrote an invalid /pav/%s: %v", where, protocol.FileSnapshotHandle, err)
	}
	raw, ok := ann[protocol.AnnotationResultSnapshotHandles]
	if !ok {
		return group, nil, fmt.Sprintf("%s succeeded but wrote no /pav/%s", where, protocol.FileSnapshotHandles)
	}
	parsed, err := protocol.ParseSnapshotHandles(raw, volumes)
	if err != nil {
		return group, nil, fmt.Sprintf("%s wrote an invalid /pav/%s: %v", where, protocol.FileSnapshotHandles, err)
	}
	for _, m := range parsed {
		r := memberResult{MemberSnapshot: m}
		if m.RestoreSize != "" {
			n, err := parseBytes(m.RestoreSize)
			if err != nil {
				return group, nil, fmt.Sprintf("%s wrote an invalid restore size for volume %q in /pav/%s: %v", where, m.VolumeHandle, protocol.FileSnapshotHandles, err)
			}
			r.restoreSize = &n
		}
		members = append(members, r)
	}
	return group, members, ""
}

// deleteGroup runs the deletion pod (if the provisioner has one) and, once
// it succeeded, clears the group from the content's status, as
// csi-snapshotter does after DeleteVolumeGroupSnapshot (the members' list
// stays); the next sync releases the content.
func (s *groupSync) deleteGroup(ctx context.Context, pod *corev1.Pod) error {
	clear := func() error {
		return s.writeStatus(ctx, func(st *groupsnapshotv1.VolumeGroupSnapshotContentStatus) {
			st.VolumeGroupSnapshotHandle, st.ReadyToUse, st.CreationTime, st.Error = nil, nil, nil, nil
		})
	}
	if pod == nil {
		req, err := s.request(ctx)
		if err != nil && !errors.Is(err, errSnapshotClassGone) {
			return err
		}
		tmpl, err := s.c.engine.GroupSnapshotDeletion(ctx, s.p, req)
		if err != nil {
			return s.deleteFailed("evaluating spec.groupSnapshotDeletion of PavProvisioner %q: %v", s.p.Name, err)
		}
		if tmpl == nil {
			return clear()
		}
		squatter, err := s.c.createPod(ctx, protocol.GroupSnapshotPod(tmpl, s.p.Name, s.c.podDirRoot(), protocol.PhaseGroupSnapshotDeletion, s.content.Name, string(s.content.UID)))
		if squatter != nil {
			s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, protocol.PhaseGroupSnapshotDeletion))
		}
		return err
	}
	r, ok := s.c.finishedPod(ctx, pod, podWaiter{obj: s.content, queue: s.c.groupContentQueue, key: s.content.Name})
	if !ok {
		return nil
	}
	if !r.succeeded {
		return s.c.podFailed(ctx, pod, r.message, func(msg string) error { return s.deleteFailed("%s", msg) })
	}
	s.c.groupContentBackoff.succeeded(s.content.Name)
	return clear() // the pod goes with the release
}

func (s *groupSync) deleteFailed(format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, reasonGroupSnapshotDeleteError, "Failed to delete group snapshot: %s", msg)
	return s.retryLater(msg)
}

func (s *groupSync) deletePods(ctx context.Context) error {
	for _, pod := range s.pods {
		if err := s.c.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// writeStatus changes the content's status (on the version read; a
// conflict retries the sync) unless the change changes nothing.
func (s *groupSync) writeStatus(ctx context.Context, change func(*groupsnapshotv1.VolumeGroupSnapshotContentStatus)) error {
	updated := s.content.DeepCopy()
	if updated.Status == nil {
		updated.Status = &groupsnapshotv1.VolumeGroupSnapshotContentStatus{}
	}
	change(updated.Status)
	if s.content.Status != nil && equalGroupStatus(s.content.Status, updated.Status) {
		return nil
	}
	got, err := s.c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("VolumeGroupSnapshotContent %s: updating its status: %w", s.content.Name, err)
	}
	klog.V(2).InfoS("VolumeGroupSnapshotContent status updated", "content", s.content.Name, "handle", statusGroupHandle(got), "ready", groupContentReady(got))
	s.content = got
	return nil
}

// equalGroupStatus compares statuses ignoring the time of an error.
func equalGroupStatus(a, b *groupsnapshotv1.VolumeGroupSnapshotContentStatus) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	for _, st := range []*groupsnapshotv1.VolumeGroupSnapshotContentStatus{a, b} {
		if st.Error != nil {
			st.Error.Time = nil
		}
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func (s *groupSync) removeBeingCreated(ctx context.Context) error {
	if _, ok := s.content.Annotations[annGroupSnapshotBeingCreated]; !ok {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, annGroupSnapshotBeingCreated)
	got, err := s.c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch(ctx, s.content.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("VolumeGroupSnapshotContent %s: removing annotation %s: %w", s.content.Name, annGroupSnapshotBeingCreated, err)
	}
	s.content = got
	return nil
}
