package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	deleting := shouldDeleteGroupContent(c)
	if actOnCreationPod(pods[protocol.PhaseGroupSnapshotCreation], deleting) {
		return groupCreationPod
	}
	if deleting {
		if c.Spec.DeletionPolicy == snapshotv1.VolumeSnapshotContentDelete && statusGroupHandle(c) != "" {
			return groupDelete
		}
		return groupRelease
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

// groupContents is the VolumeGroupSnapshotContent kind of podContent.
var groupContents = contentKind[*groupsnapshotv1.VolumeGroupSnapshotContent, groupsnapshotv1.VolumeGroupSnapshotContentStatus]{
	resource: "VolumeGroupSnapshotContent", what: "group snapshot",
	annBeingCreated: annGroupSnapshotBeingCreated, finalizer: finalizerGroupContentBound,
	reasonCreationFailed: reasonGroupSnapshotCreationFailed, reasonDeleteError: reasonGroupSnapshotDeleteError,
	creation: protocol.PhaseGroupSnapshotCreation, deletion: protocol.PhaseGroupSnapshotDeletion,
	pod:    protocol.GroupSnapshotPod,
	driver: func(c *groupsnapshotv1.VolumeGroupSnapshotContent) string { return c.Spec.Driver },
	handle: statusGroupHandle,
	ready:  groupContentReady,
	status: func(c *groupsnapshotv1.VolumeGroupSnapshotContent) *groupsnapshotv1.VolumeGroupSnapshotContentStatus {
		if c.Status == nil {
			c.Status = &groupsnapshotv1.VolumeGroupSnapshotContentStatus{}
		}
		return c.Status
	},
	failed: func(st *groupsnapshotv1.VolumeGroupSnapshotContentStatus, e *snapshotv1.VolumeSnapshotError) {
		st.Error, st.ReadyToUse = e, ptrTo(false)
	},
}

// groupSync is one sync of one VolumeGroupSnapshotContent.
type groupSync struct {
	podContent[*groupsnapshotv1.VolumeGroupSnapshotContent, groupsnapshotv1.VolumeGroupSnapshotContentStatus]
}

func (c *Controller) syncGroupContent(ctx context.Context, name string) error {
	s := &groupSync{newPodContent(c, &groupContents, c.snapshots.GroupsnapshotV1().VolumeGroupSnapshotContents(), c.groupContentQueue, c.groupContentBackoff)}
	if ok, err := s.open(name, c.groupContents.Get); !ok {
		return err
	}
	step := decideGroupSnapshot(s.content, s.pods)
	if s.backingOff(step == groupRelease) {
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
			st.VolumeGroupSnapshotHandle = &s.content.Spec.Source.GroupSnapshotHandles.VolumeGroupSnapshotHandle
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
		return s.release(ctx)
	case groupCleanup:
		return s.deletePods(ctx)
	}
	return nil
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
	if ok, err := s.reread(ctx, func(live *groupsnapshotv1.VolumeGroupSnapshotContent) bool {
		return decideGroupSnapshot(live, s.pods) == groupCreate
	}); !ok {
		return err
	}
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
	return s.startCreation(ctx, "groupSnapshotCreation", tmpl, ok, err)
}

// creationPodState acts on the creation pod once it is done: its results
// go into the content's status (the group's handle and each volume's
// snapshot), then the being-created mark and the pod go.
func (s *groupSync) creationPodState(ctx context.Context, pod *corev1.Pod) error {
	r, ok := s.finishedPod(ctx, pod)
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
	s.backoff.succeeded(s.content.Name)
	return s.c.deletePod(ctx, pod)
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
// stays).
func (s *groupSync) deleteGroup(ctx context.Context, pod *corev1.Pod) error {
	return s.deleteSnapshot(ctx, pod, func() (*corev1.PodTemplateSpec, error) {
		req, err := s.request(ctx)
		if err != nil && !errors.Is(err, errSnapshotClassGone) {
			return nil, err
		}
		tmpl, err := s.c.engine.GroupSnapshotDeletion(ctx, s.p, req)
		if err != nil {
			return nil, s.deleteFailed("evaluating spec.groupSnapshotDeletion of PavProvisioner %q: %v", s.p.Name, err)
		}
		return tmpl, nil
	}, func(st *groupsnapshotv1.VolumeGroupSnapshotContentStatus) {
		st.VolumeGroupSnapshotHandle, st.ReadyToUse, st.CreationTime, st.Error = nil, nil, nil, nil
	})
}
