package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

const (
	testGroupContent  = "groupsnapcontent-1"
	resultGroupHandle = "group-1"
	secondHandle      = "vol-2"
)

func isGroupSnapshotObject(o runtime.Object) bool {
	switch o.(type) {
	case *groupsnapshotv1.VolumeGroupSnapshotContent, *groupsnapshotv1.VolumeGroupSnapshot, *groupsnapshotv1.VolumeGroupSnapshotClass:
		return true
	}
	return false
}

// groupContentFixture is a dynamic group content of the test volume and a
// second one, as the snapshot-controller creates it for a VolumeGroupSnapshot.
func groupContentFixture(policy snapshotv1.DeletionPolicy) *groupsnapshotv1.VolumeGroupSnapshotContent {
	class := "group-class"
	return &groupsnapshotv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: testGroupContent, UID: "group-content-uid", Finalizers: []string{finalizerGroupContentBound}},
		Spec: groupsnapshotv1.VolumeGroupSnapshotContentSpec{
			Driver: testProvisioner, DeletionPolicy: policy, VolumeGroupSnapshotClassName: &class,
			Source:                 groupsnapshotv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{resultHandle, secondHandle}},
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: "ns", Name: "group", UID: "group-uid"},
		},
	}
}

// groupSnapshotResults plays a group snapshot creation pod's /pav files.
func (h *harness) groupSnapshotResults(pod *corev1.Pod) {
	pod.Annotations[protocol.AnnotationResultSnapshotHandle] = resultGroupHandle + "\n"
	if h.groupHandles != nil {
		pod.Annotations[protocol.AnnotationResultSnapshotHandles] = *h.groupHandles
		return
	}
	c, err := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), pod.Annotations[protocol.AnnotationGroupSnapshotContent], metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	var b strings.Builder
	for i, v := range c.Spec.Source.VolumeHandles {
		fmt.Fprintf(&b, "%s snap-%s", v, v)
		if i == 0 {
			b.WriteString(" 1Gi") // the second writes no restore size
		}
		b.WriteString("\n")
	}
	pod.Annotations[protocol.AnnotationResultSnapshotHandles] = b.String()
}

func (h *harness) groupContent() (*groupsnapshotv1.VolumeGroupSnapshotContent, error) {
	return h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(context.Background(), testGroupContent, metav1.GetOptions{})
}

func (h *harness) groupStep() error {
	h.now = h.now.Add(time.Hour)
	h.runPods()
	h.refresh()
	return h.c.syncGroupContent(context.Background(), testGroupContent)
}

// groupSnapshotting: a VolumeGroupSnapshotContent of the provisioned volume
// and a second one, until its status holds the creation pod's results.
func groupSnapshotting(policy snapshotv1.DeletionPolicy) scenario {
	return scenario{
		setup: func(h *harness) {
			h.t.Helper()
			provisioning.run(h.t, h, 10)
			ctx := context.Background()
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: "pv-2"},
				Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{
					CSI: &corev1.CSIPersistentVolumeSource{Driver: testProvisioner, VolumeHandle: secondHandle}}},
			}
			if _, err := h.kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				h.t.Fatal(err)
			}
			class := &groupsnapshotv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "group-class"}, Driver: testProvisioner,
				Parameters: map[string]string{"kind": "fast"}}
			if _, err := h.snap.GroupsnapshotV1().VolumeGroupSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
				h.t.Fatal(err)
			}
			if _, err := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, groupContentFixture(policy), metav1.CreateOptions{}); err != nil {
				h.t.Fatal(err)
			}
		},
		step: (*harness).groupStep,
		done: func(h *harness) bool {
			c, err := h.groupContent()
			if err != nil {
				return false
			}
			_, creating := c.Annotations[annGroupSnapshotBeingCreated]
			return groupContentReady(c) && !creating && h.noPods()
		},
		check: func(h *harness) {
			c, _ := h.groupContent()
			st := c.Status
			if statusGroupHandle(c) != resultGroupHandle || st.CreationTime == nil || st.Error != nil || len(st.VolumeSnapshotInfoList) != 2 {
				h.t.Fatalf("group content status %+v", st)
			}
			for i, v := range []string{resultHandle, secondHandle} {
				info := st.VolumeSnapshotInfoList[i]
				if info.VolumeHandle != v || info.SnapshotHandle != "snap-"+v || info.ReadyToUse == nil || !*info.ReadyToUse || info.CreationTime == nil {
					h.t.Errorf("member %d: %+v", i, info)
				}
			}
			if rs := st.VolumeSnapshotInfoList[0].RestoreSize; rs == nil || *rs != 1<<30 {
				h.t.Errorf("member 0's restore size %v, want 1Gi", rs)
			}
			if rs := st.VolumeSnapshotInfoList[1].RestoreSize; rs != nil {
				h.t.Errorf("member 1's restore size %v, want none", *rs)
			}
		},
		once: protocol.PhaseGroupSnapshotCreation,
	}
}

// TestGroupSnapshotCreationSurvivesAFaultAtEveryWrite: the group creation
// pod runs once, and the content's status gets the group's handle and each
// volume's snapshot, from which the snapshot-controller makes the members.
func TestGroupSnapshotCreationSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, groupSnapshotting(snapshotv1.VolumeSnapshotContentDelete))
}

// markGroupContentDeleted does what the snapshot-controller does when the
// VolumeGroupSnapshot bound to the content goes.
func markGroupContentDeleted(h *harness) {
	h.t.Helper()
	ctx := context.Background()
	contents := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents()
	c, err := h.groupContent()
	if err != nil {
		h.t.Fatal(err)
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annGroupSnapshotBeingDeleted] = "yes"
	if _, err := contents.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if err := contents.Delete(ctx, testGroupContent, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// groupSnapshotDeletion: a ready group content with policy Delete that the
// snapshot-controller marked for deletion, until it is gone.
var groupSnapshotDeletion = scenario{
	setup: func(h *harness) {
		h.t.Helper()
		sn := groupSnapshotting(snapshotv1.VolumeSnapshotContentDelete)
		sn.setup(h)
		sn.run(h.t, h, 10)
		markGroupContentDeleted(h)
	},
	step: (*harness).groupStep,
	done: func(h *harness) bool {
		_, err := h.groupContent()
		return apierrors.IsNotFound(err) && h.noPods()
	},
	check: func(h *harness) {},
	once:  protocol.PhaseGroupSnapshotDeletion,
}

// TestGroupSnapshotDeletionSurvivesAFaultAtEveryWrite: the group deletion
// pod runs once, then the content's finalizer goes.
func TestGroupSnapshotDeletionSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, groupSnapshotDeletion)
}

// With deletionPolicy Retain the group is kept: no deletion pod.
func TestGroupSnapshotRetainRunsNoDeletionPod(t *testing.T) {
	h := newHarness(t, testObjects()...)
	sn := groupSnapshotting(snapshotv1.VolumeSnapshotContentRetain)
	sn.setup(h)
	sn.run(t, h, 10)
	markGroupContentDeleted(h)
	h.clearActions()
	for i := 0; i < 5; i++ {
		_ = h.groupStep()
	}
	if _, err := h.groupContent(); !apierrors.IsNotFound(err) {
		t.Fatalf("group content still there: %v\n%s", err, h.describe())
	}
	for _, a := range h.actions() {
		if isPodCreate(a, protocol.PhaseGroupSnapshotDeletion) {
			t.Errorf("a deletion pod was created:\n%s", h.describe())
		}
	}
}

// A creation pod whose /pav/snapshot-handles misses a volume: the group's
// handle is recorded (so that the group can be deleted), not ready, with
// the error, and no members (the snapshot-controller makes none); no second
// pod cuts another group.
func TestGroupSnapshotWithBadHandlesIsRecordedNotReady(t *testing.T) {
	h := newHarness(t, testObjects()...)
	bad := resultHandle + " snap-1\n"
	h.groupHandles = &bad
	sn := groupSnapshotting(snapshotv1.VolumeSnapshotContentDelete)
	sn.setup(h)
	for i := 0; i < 6; i++ {
		_ = h.groupStep()
	}
	c, err := h.groupContent()
	if err != nil {
		t.Fatal(err)
	}
	st := c.Status
	if statusGroupHandle(c) != resultGroupHandle || groupContentReady(c) || st.Error == nil || len(st.VolumeSnapshotInfoList) != 0 {
		t.Fatalf("status %+v", st)
	}
	if msg := *st.Error.Message; !strings.Contains(msg, `no line names volume "vol-2"`) {
		t.Errorf("error %q does not say what is wrong", msg)
	}
	creations := 0
	for _, a := range h.actions() {
		if isPodCreate(a, protocol.PhaseGroupSnapshotCreation) {
			creations++
		}
	}
	if creations != 1 || !h.noPods() {
		t.Errorf("%d creation pods (want 1), pods left: %v\n%s", creations, !h.noPods(), h.describe())
	}
	if _, ok := c.Annotations[annGroupSnapshotBeingCreated]; ok {
		t.Errorf("being-created annotation left")
	}
}

// A dynamic group content without a class fails, as csi-snapshotter's, and
// runs no pod.
func TestGroupSnapshotWithoutAClassFails(t *testing.T) {
	h := newHarness(t, testObjects()...)
	sn := groupSnapshotting(snapshotv1.VolumeSnapshotContentDelete)
	sn.setup(h)
	c, _ := h.groupContent()
	c.Spec.VolumeGroupSnapshotClassName = nil
	if _, err := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Update(context.Background(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.groupStep(); !isRetryScheduled(err) {
		t.Fatalf("sync: %v", err)
	}
	c, _ = h.groupContent()
	if c.Status == nil || c.Status.Error == nil || !strings.Contains(*c.Status.Error.Message, "needs a VolumeGroupSnapshotClass") {
		t.Errorf("status %+v", c.Status)
	}
	if !h.noPods() {
		t.Errorf("a pod was created:\n%s", h.describe())
	}
}

func TestDecideGroupSnapshot(t *testing.T) {
	now := metav1.Now()
	group := "group"
	dyn := func(mod func(c *groupsnapshotv1.VolumeGroupSnapshotContent)) *groupsnapshotv1.VolumeGroupSnapshotContent {
		c := groupContentFixture(snapshotv1.VolumeSnapshotContentDelete)
		c.Annotations = map[string]string{}
		mod(c)
		return c
	}
	ready := func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
		c.Status = &groupsnapshotv1.VolumeGroupSnapshotContentStatus{VolumeGroupSnapshotHandle: &group, ReadyToUse: ptrTo(true)}
	}
	deleting := func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
		c.DeletionTimestamp = &now
		c.Annotations[annGroupSnapshotBeingDeleted] = "yes"
	}
	pod := &corev1.Pod{}
	for name, tc := range map[string]struct {
		content *groupsnapshotv1.VolumeGroupSnapshotContent
		pods    map[protocol.Phase]*corev1.Pod
		want    groupStep
	}{
		"new dynamic content": {dyn(func(*groupsnapshotv1.VolumeGroupSnapshotContent) {}), nil, groupCreate},
		"creation pod exists": {dyn(func(*groupsnapshotv1.VolumeGroupSnapshotContent) {}), map[protocol.Phase]*corev1.Pod{protocol.PhaseGroupSnapshotCreation: pod}, groupCreationPod},
		"ready":               {dyn(ready), nil, groupNone},
		"ready, mark left": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			ready(c)
			c.Annotations[annGroupSnapshotBeingCreated] = "yes"
		}), nil, groupRemoveBeingCreated},
		"failed attempt": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			c.Status = &groupsnapshotv1.VolumeGroupSnapshotContentStatus{ReadyToUse: ptrTo(false)}
		}), nil, groupCreate},
		"recorded with an error: not cut again": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			c.Status = &groupsnapshotv1.VolumeGroupSnapshotContentStatus{VolumeGroupSnapshotHandle: &group, ReadyToUse: ptrTo(false),
				Error: &snapshotv1.VolumeSnapshotError{Message: ptrTo("bad")}}
		}), nil, groupNone},
		"marked for deletion, Delete": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) { ready(c); deleting(c) }), nil, groupDelete},
		"marked for deletion while its creation pod runs": {dyn(deleting),
			map[protocol.Phase]*corev1.Pod{protocol.PhaseGroupSnapshotCreation: {Spec: corev1.PodSpec{NodeName: "node-1"}}}, groupCreationPod},
		"marked for deletion, its creation pod on no node yet": {dyn(deleting),
			map[protocol.Phase]*corev1.Pod{protocol.PhaseGroupSnapshotCreation: pod}, groupRelease},
		"marked for deletion, Retain": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			ready(c)
			deleting(c)
			c.Spec.DeletionPolicy = snapshotv1.VolumeSnapshotContentRetain
		}), nil, groupRelease},
		"deleted while being created": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			deleting(c)
			c.Annotations[annGroupSnapshotBeingCreated] = "yes"
		}), nil, groupCreate},
		"deleted, not marked by the snapshot-controller": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			ready(c)
			c.DeletionTimestamp = &now
		}), nil, groupNone},
		"group deleted, handle cleared": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			deleting(c)
			c.Status = &groupsnapshotv1.VolumeGroupSnapshotContentStatus{}
		}), map[protocol.Phase]*corev1.Pod{protocol.PhaseGroupSnapshotDeletion: pod}, groupRelease},
		"pre-provisioned": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			c.Spec.Source = groupsnapshotv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupsnapshotv1.GroupSnapshotHandles{
				VolumeGroupSnapshotHandle: group, VolumeSnapshotHandles: []string{"a", "b"}}}
		}), nil, groupStaticReady},
		"pre-provisioned, never bound, deleted": {dyn(func(c *groupsnapshotv1.VolumeGroupSnapshotContent) {
			c.Spec.Source = groupsnapshotv1.VolumeGroupSnapshotContentSource{GroupSnapshotHandles: &groupsnapshotv1.GroupSnapshotHandles{
				VolumeGroupSnapshotHandle: group, VolumeSnapshotHandles: []string{"a"}}}
			c.Spec.VolumeGroupSnapshotRef.UID = ""
			c.Spec.DeletionPolicy = snapshotv1.VolumeSnapshotContentRetain
			c.DeletionTimestamp = &now
		}), nil, groupRelease},
		"ready, a finished pod left": {dyn(ready), map[protocol.Phase]*corev1.Pod{protocol.PhaseGroupSnapshotDeletion: pod}, groupCleanup},
	} {
		t.Run(name, func(t *testing.T) {
			if got := decideGroupSnapshot(tc.content, tc.pods); got != tc.want {
				t.Errorf("decideGroupSnapshot = %d, want %d", got, tc.want)
			}
		})
	}
}

// A deleted provisioner is held while a Delete group content of its is
// left (its deletion pod needs the provisioner), and the Ready condition
// says so.
func TestProvisionerKeptWhileItsDeleteGroupContentsExist(t *testing.T) {
	h := newHarness(t, groupContentFixture(snapshotv1.VolumeSnapshotContentDelete))
	ctx := context.Background()
	h.syncProvisioner() // adds the provisioner's finalizer
	p, err := h.pav.PavV1alpha1().PavProvisioners().Get(ctx, testProvisioner, metav1.GetOptions{})
	if err != nil || !protocol.HasFinalizer(p, protocol.FinalizerProvisioner) {
		t.Fatalf("provisioner %+v (%v), want its finalizer", p, err)
	}
	now := metav1.Now()
	p.DeletionTimestamp = &now
	h.prov = p
	h.syncProvisioner()
	if p, err = h.pav.PavV1alpha1().PavProvisioners().Get(ctx, testProvisioner, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if !protocol.HasFinalizer(p, protocol.FinalizerProvisioner) {
		t.Fatal("provisioner released while a Delete group content of its is left")
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "1 VolumeGroupSnapshotContent(s)") {
		t.Errorf("Ready condition %+v, want one counting the group content", c)
	}
}

// A group content deleted while its failed creation waits out its backoff
// (the snapshot-controller marks it being deleted) is released at once, as
// csi-snapshotter does: the release runs no pod, so the backoff of the
// creation's retries does not hold it (which held the provisioner's own
// deletion for up to the retry maximum).
func TestGroupContentDeletedDuringCreationBackoffIsReleased(t *testing.T) {
	h := newHarness(t, testObjects()...)
	groupSnapshotting(snapshotv1.VolumeSnapshotContentDelete).setup(h)
	ctx := context.Background()
	c, _ := h.groupContent()
	c.Spec.VolumeGroupSnapshotClassName = nil
	if _, err := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.groupStep(); !isRetryScheduled(err) {
		t.Fatalf("creation without a class: %v", err)
	}
	c, _ = h.groupContent()
	c.DeletionTimestamp = &metav1.Time{Time: h.now}
	c.Annotations = map[string]string{annGroupSnapshotBeingDeleted: "yes"}
	if _, err := h.snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh() // no time passes: the creation's backoff still runs
	if err := h.c.syncGroupContent(ctx, testGroupContent); err != nil {
		t.Fatalf("sync of the deleted content: %v", err)
	}
	c, _ = h.groupContent()
	if slices.Contains(c.Finalizers, finalizerGroupContentBound) {
		t.Errorf("the deleted content keeps its finalizer %v until the creation's backoff ends", c.Finalizers)
	}
}
