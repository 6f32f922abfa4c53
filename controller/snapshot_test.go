package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

const (
	testContent          = "snapcontent-1"
	resultSnapshotHandle = "snap-1"
)

// contentFixture is a dynamic content of the test volume, as the
// snapshot-controller creates it for a VolumeSnapshot.
func contentFixture(policy snapshotv1.DeletionPolicy) *snapshotv1.VolumeSnapshotContent {
	handle := resultHandle
	return &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: testContent, UID: "content-uid", Finalizers: []string{finalizerContentBound}},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			Driver:            testProvisioner,
			DeletionPolicy:    policy,
			Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ns", Name: "snap", UID: "snap-uid"},
		},
	}
}

func (h *harness) content() (*snapshotv1.VolumeSnapshotContent, error) {
	return h.snap.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), testContent, metav1.GetOptions{})
}

func (h *harness) noPods() bool {
	pods, _ := h.kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	return len(pods.Items) == 0
}

func (h *harness) contentStep() error {
	h.now = h.now.Add(time.Hour)
	h.runPods()
	h.refresh()
	return h.c.syncContent(context.Background(), testContent)
}

// snapshotting: a VolumeSnapshotContent of a provisioned volume, until its
// status holds the creation pod's results.
func snapshotting(policy snapshotv1.DeletionPolicy) scenario {
	return scenario{
		setup: func(h *harness) {
			h.t.Helper()
			provisioning.run(h.t, h, 10)
			if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Create(context.Background(), contentFixture(policy), metav1.CreateOptions{}); err != nil {
				h.t.Fatal(err)
			}
		},
		step: (*harness).contentStep,
		done: func(h *harness) bool {
			c, err := h.content()
			if err != nil {
				return false
			}
			_, creating := c.Annotations[annSnapshotBeingCreated]
			return contentReady(c) && !creating && h.noPods()
		},
		check: func(h *harness) {
			c, _ := h.content()
			st := c.Status
			if statusHandle(c) != resultSnapshotHandle || st.RestoreSize == nil || *st.RestoreSize != 2<<30 || st.CreationTime == nil || st.Error != nil {
				h.t.Errorf("content status %+v", st)
			}
		},
		once: protocol.PhaseSnapshotCreation,
	}
}

// TestSnapshotCreationSurvivesAFaultAtEveryWrite: the creation pod runs
// once, and the content's status gets its handle, size and readiness.
func TestSnapshotCreationSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, snapshotting(snapshotv1.VolumeSnapshotContentDelete))
}

// The contents' watch lags the pods' one: the cache still holds the content
// as it was before its creation pod's results were recorded, while that pod
// is already gone from the pods' cache. The next sync must not run a second
// creation pod (which would cut a second snapshot and leak the first).
func TestSyncContentRunsNoCreationPodForASnapshotTheCacheHasUncut(t *testing.T) {
	h := newHarness(t, testObjects()...)
	sn := snapshotting(snapshotv1.VolumeSnapshotContentDelete)
	sn.setup(h)
	h.refresh()
	stale, err := h.c.contents.Get(testContent)
	if err != nil {
		t.Fatal(err)
	}
	stale = stale.DeepCopy()
	sn.run(t, h, 10)

	h.refresh() // the pods' cache is current: no creation pod
	if err := h.c.contentIndexer.Add(stale); err != nil {
		t.Fatal(err)
	}
	h.kube.ClearActions()
	if err := h.c.syncContent(context.Background(), testContent); err != nil {
		t.Fatal(err)
	}
	for _, a := range h.kube.Actions() {
		if isPodCreate(a, protocol.PhaseSnapshotCreation) {
			t.Errorf("a second creation pod for a snapshot already cut:\n%s", h.describe())
		}
	}
}

// The snapshot-controller marks a content for deletion as soon as its
// VolumeSnapshot goes, without waiting for PaV's being-created mark; its
// patch replaces the annotations with those of its cache, which can drop
// that mark. Here that happens just after PaV created the creation pod,
// while the pods' cache does not show the pod yet. The content must not be
// released under the running pod: the snapshot it cuts is recorded, then
// deleted by one deletion pod, and only then does the content go.
func TestSnapshotDeletedWhileItsCreationPodStartsIsDeletedOnceCut(t *testing.T) {
	h := newHarness(t, testObjects()...)
	ctx := context.Background()
	sn := snapshotting(snapshotv1.VolumeSnapshotContentDelete)
	sn.setup(h)
	h.refresh()
	if err := h.c.syncContent(ctx, testContent); err != nil {
		t.Fatal(err)
	}
	created := h.podsCreated(protocol.PhaseSnapshotCreation)
	if len(created) != 1 {
		t.Fatalf("%d creation pods, want 1:\n%s", len(created), h.describe())
	}
	// The scheduler puts the pod on a node; the snapshot-controller, its
	// cache behind PaV's mark, marks the content for deletion and deletes it.
	pod, err := h.kube.CoreV1().Pods(created[0].Namespace).Get(ctx, created[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.NodeName = "node-1"
	if _, err := h.kube.CoreV1().Pods(pod.Namespace).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c, err := h.content()
	if err != nil {
		t.Fatal(err)
	}
	c.Annotations = map[string]string{annSnapshotBeingDeleted: "yes"}
	if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, testContent, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The contents' cache has the deletion; the pods' cache has no pod yet.
	c, err = h.content()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.contentIndexer.Update(c); err != nil {
		t.Fatal(err)
	}
	_ = h.c.syncContent(ctx, testContent)
	if _, err := h.content(); err != nil {
		t.Fatalf("content released while its creation pod runs (%v):\n%s", err, h.describe())
	}
	// The pods' cache catches up, with the pod still running.
	h.refresh()
	_ = h.c.syncContent(ctx, testContent)
	if _, err := h.content(); err != nil {
		t.Fatalf("content released while its creation pod runs (%v):\n%s", err, h.describe())
	}
	if pods, _ := h.kube.CoreV1().Pods(pod.Namespace).List(ctx, metav1.ListOptions{}); len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil {
		t.Fatalf("the running creation pod was deleted:\n%s", h.describe())
	}
	for i := 0; i < 10 && !snapshotDeletion.done(h); i++ {
		_ = h.contentStep()
	}
	if !snapshotDeletion.done(h) {
		t.Fatalf("content not released once its snapshot was deleted:\n%s", h.describe())
	}
	// A deletion pod runs only for a content that records its snapshot.
	if n := len(h.podsCreated(protocol.PhaseSnapshotDeletion)); n != 1 {
		t.Errorf("%d deletion pods, want 1:\n%s", n, h.describe())
	}
}

// snapshotDeletion: a ready content with policy Delete that the
// snapshot-controller marked for deletion, until it is gone.
var snapshotDeletion = scenario{
	setup: func(h *harness) {
		h.t.Helper()
		sn := snapshotting(snapshotv1.VolumeSnapshotContentDelete)
		sn.setup(h)
		sn.run(h.t, h, 10)
		markContentDeleted(h)
	},
	step: (*harness).contentStep,
	done: func(h *harness) bool {
		_, err := h.content()
		return apierrors.IsNotFound(err) && h.noPods()
	},
	check: func(h *harness) {},
	once:  protocol.PhaseSnapshotDeletion,
}

// markContentDeleted does what the snapshot-controller does when a
// VolumeSnapshot bound to the content goes.
func markContentDeleted(h *harness) {
	h.t.Helper()
	ctx := context.Background()
	contents := h.snap.SnapshotV1().VolumeSnapshotContents()
	c, err := h.content()
	if err != nil {
		h.t.Fatal(err)
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annSnapshotBeingDeleted] = "yes"
	if _, err := contents.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if err := contents.Delete(ctx, testContent, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// TestSnapshotDeletionSurvivesAFaultAtEveryWrite: the deletion pod runs
// once, then the content's finalizer goes.
func TestSnapshotDeletionSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, snapshotDeletion)
}

// With deletionPolicy Retain the snapshot is kept: no deletion pod, and the
// content is released.
func TestSnapshotRetainRunsNoDeletionPod(t *testing.T) {
	h := newHarness(t, testObjects()...)
	sn := snapshotting(snapshotv1.VolumeSnapshotContentRetain)
	sn.setup(h)
	sn.run(t, h, 10)
	markContentDeleted(h)
	h.clearActions()
	for i := 0; i < 5; i++ {
		_ = h.contentStep()
	}
	if _, err := h.content(); !apierrors.IsNotFound(err) {
		t.Fatalf("content still there: %v\n%s", err, h.describe())
	}
	for _, a := range h.actions() {
		if isPodCreate(a, protocol.PhaseSnapshotDeletion) {
			t.Errorf("a deletion pod was created:\n%s", h.describe())
		}
	}
}

// A pre-provisioned content is ready with its own handle, without a pod.
func TestPreProvisionedSnapshotIsReadyWithoutAPod(t *testing.T) {
	handle := "existing-snap"
	c := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: testContent, UID: "content-uid"},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			Driver: testProvisioner, DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain,
			Source:            snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: &handle},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ns", Name: "snap"},
		},
	}
	h := newHarness(t, append(testObjects(), c)...)
	if err := h.contentStep(); err != nil {
		t.Fatal(err)
	}
	got, _ := h.content()
	if !contentReady(got) || statusHandle(got) != handle || got.Status.CreationTime == nil {
		t.Errorf("status %+v", got.Status)
	}
	if !h.noPods() {
		t.Errorf("pods created:\n%s", h.describe())
	}
}

// A failed creation pod: status.error and an Event, the pod and the
// being-created mark go, and the next attempt waits for its backoff.
func TestSnapshotCreationFailureIsReportedAndRetried(t *testing.T) {
	h := newHarness(t, testObjects()...)
	provisioning.run(t, h, 10)
	ctx := context.Background()
	if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, contentFixture(snapshotv1.VolumeSnapshotContentDelete), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if err := h.c.syncContent(ctx, testContent); err != nil {
		t.Fatal(err)
	}
	name := protocol.PodName(protocol.PhaseSnapshotCreation, "content-uid")
	pod, err := h.kube.CoreV1().Pods("pav-pods").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no creation pod: %v\n%s", err, h.describe())
	}
	pod.Status.Phase = corev1.PodFailed
	pod.Annotations[protocol.AnnotationResultsCollected] = "true"
	pod.Annotations[protocol.AnnotationResultError] = "the pool is full"
	if _, err := h.kube.CoreV1().Pods("pav-pods").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if err := h.c.syncContent(ctx, testContent); !isRetryScheduled(err) {
		t.Fatalf("sync: %v", err)
	}
	c, _ := h.content()
	if c.Status == nil || c.Status.Error == nil || !strings.Contains(*c.Status.Error.Message, "the pool is full") || contentReady(c) {
		t.Errorf("status %+v", c.Status)
	}
	if _, ok := c.Annotations[annSnapshotBeingCreated]; ok {
		t.Errorf("being-created annotation left: %v", c.Annotations)
	}
	if !h.noPods() {
		t.Errorf("failed pod left:\n%s", h.describe())
	}
	if ev := strings.Join(drain(h.events), "\n"); !strings.Contains(ev, reasonSnapshotCreationFailed) {
		t.Errorf("events: %s", ev)
	}
	// Within the backoff nothing starts; after it a new attempt does.
	h.refresh()
	if err := h.c.syncContent(ctx, testContent); err != nil || !h.noPods() {
		t.Fatalf("an attempt started within the backoff: %v\n%s", err, h.describe())
	}
	snapshotting(snapshotv1.VolumeSnapshotContentDelete).run(t, h, 10)
}

// A content whose VolumeSnapshotClass does not exist is not cut (its
// parameters say how): status.error and an Event naming the class, no pod,
// retried; once the class exists the snapshot is taken. Its deletion needs
// no class.
func TestSnapshotOfAMissingClassFails(t *testing.T) {
	h := newHarness(t, testObjects()...)
	provisioning.run(t, h, 10)
	ctx := context.Background()
	content := contentFixture(snapshotv1.VolumeSnapshotContentDelete)
	class := "gone"
	content.Spec.VolumeSnapshotClassName = &class
	if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if err := h.c.syncContent(ctx, testContent); !isRetryScheduled(err) {
		t.Fatalf("sync: %v", err)
	}
	c, _ := h.content()
	if c.Status == nil || c.Status.Error == nil || !strings.Contains(*c.Status.Error.Message, "VolumeSnapshotClass not found: gone") || contentReady(c) {
		t.Errorf("status %+v", c.Status)
	}
	if !h.noPods() {
		t.Errorf("a pod runs without the class:\n%s", h.describe())
	}
	if ev := strings.Join(drain(h.events), "\n"); !strings.Contains(ev, reasonSnapshotCreationFailed) || !strings.Contains(ev, "gone") {
		t.Errorf("events: %s", ev)
	}
	if _, err := h.snap.SnapshotV1().VolumeSnapshotClasses().Create(ctx, &snapshotv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Driver: testProvisioner, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	snapshotting(snapshotv1.VolumeSnapshotContentDelete).run(t, h, 10)
	if err := h.snap.SnapshotV1().VolumeSnapshotClasses().Delete(ctx, class, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	markContentDeleted(h)
	for i := 0; i < 10; i++ {
		_ = h.contentStep()
	}
	if _, err := h.content(); !apierrors.IsNotFound(err) {
		t.Fatalf("content of a deleted class not deleted: %v\n%s", err, h.describe())
	}
}

func TestDecideSnapshot(t *testing.T) {
	now := metav1.Now()
	handle, snapHandle := "vol", "snap"
	dyn := func(mod func(c *snapshotv1.VolumeSnapshotContent)) *snapshotv1.VolumeSnapshotContent {
		c := &snapshotv1.VolumeSnapshotContent{Spec: snapshotv1.VolumeSnapshotContentSpec{
			DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			Source:         snapshotv1.VolumeSnapshotContentSource{VolumeHandle: &handle},
		}}
		c.Annotations = map[string]string{}
		mod(c)
		return c
	}
	ready := func(c *snapshotv1.VolumeSnapshotContent) {
		c.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &snapHandle, ReadyToUse: ptrTo(true)}
	}
	deleting := func(c *snapshotv1.VolumeSnapshotContent) {
		c.DeletionTimestamp = &now
		c.Annotations[annSnapshotBeingDeleted] = "yes"
	}
	pod := &corev1.Pod{}
	onNode := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-1"}}
	for name, tc := range map[string]struct {
		content *snapshotv1.VolumeSnapshotContent
		pods    map[protocol.Phase]*corev1.Pod
		want    snapshotStep
	}{
		"new dynamic content": {dyn(func(*snapshotv1.VolumeSnapshotContent) {}), nil, snapCreate},
		"creation pod exists": {dyn(func(*snapshotv1.VolumeSnapshotContent) {}), map[protocol.Phase]*corev1.Pod{protocol.PhaseSnapshotCreation: pod}, snapCreationPod},
		"ready":               {dyn(ready), nil, snapNone},
		"ready, mark left": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			ready(c)
			c.Annotations[annSnapshotBeingCreated] = "yes"
		}), nil, snapRemoveBeingCreated},
		"failed attempt, status error only": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{ReadyToUse: ptrTo(false)}
		}), nil, snapCreate},
		"marked for deletion, Delete": {dyn(func(c *snapshotv1.VolumeSnapshotContent) { ready(c); deleting(c) }), nil, snapDelete},
		"marked for deletion, Retain": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			ready(c)
			deleting(c)
			c.Spec.DeletionPolicy = snapshotv1.VolumeSnapshotContentRetain
		}), nil, snapRelease},
		"deleted while being created": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			deleting(c)
			c.Annotations[annSnapshotBeingCreated] = "yes"
		}), nil, snapCreate},
		"marked for deletion while its creation pod runs, being-created mark dropped": {dyn(deleting),
			map[protocol.Phase]*corev1.Pod{protocol.PhaseSnapshotCreation: onNode}, snapCreationPod},
		"marked for deletion, its creation pod on no node yet": {dyn(deleting),
			map[protocol.Phase]*corev1.Pod{protocol.PhaseSnapshotCreation: pod}, snapRelease},
		"deleted, not marked by the snapshot-controller": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			ready(c)
			c.DeletionTimestamp = &now
		}), nil, snapNone},
		"deleted before its first attempt": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.DeletionTimestamp = &now
		}), nil, snapCreate},
		"snapshot deleted, handle cleared": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			deleting(c)
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{}
		}), map[protocol.Phase]*corev1.Pod{protocol.PhaseSnapshotDeletion: pod}, snapRelease},
		"pre-provisioned": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Spec.Source = snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: &snapHandle}
		}), nil, snapStaticReady},
		"pre-provisioned, never bound, deleted": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Spec.Source = snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: &snapHandle}
			c.Spec.DeletionPolicy = snapshotv1.VolumeSnapshotContentRetain
			c.DeletionTimestamp = &now
		}), nil, snapRelease},
		"ready, a finished pod left": {dyn(ready), map[protocol.Phase]*corev1.Pod{protocol.PhaseSnapshotDeletion: pod}, snapCleanup},
		"cut, not ready yet: checked again": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &snapHandle, ReadyToUse: ptrTo(false)}
		}), nil, snapCreate},
		"cut, with an error: not checked again": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &snapHandle, ReadyToUse: ptrTo(false),
				Error: &snapshotv1.VolumeSnapshotError{Message: ptrTo("bad restore size")}}
		}), nil, snapNone},
		"group member, status not recorded yet": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Annotations[annGroupSnapshotHandle] = "group"
		}), nil, snapNone},
		"group member, not ready": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Annotations[annGroupSnapshotHandle] = "group"
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &snapHandle, ReadyToUse: ptrTo(false), VolumeGroupSnapshotHandle: ptrTo("group")}
		}), nil, snapNone},
		"group member, marked for deletion, Delete: the group deletes it": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Annotations[annGroupSnapshotHandle] = "group"
			ready(c)
			c.Status.VolumeGroupSnapshotHandle = ptrTo("group")
			deleting(c)
		}), nil, snapRelease},
		"not ready, being deleted": {dyn(func(c *snapshotv1.VolumeSnapshotContent) {
			c.Status = &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: &snapHandle, ReadyToUse: ptrTo(false)}
			deleting(c)
		}), nil, snapDelete},
	} {
		t.Run(name, func(t *testing.T) {
			if got := decideSnapshot(tc.content, tc.pods); got != tc.want {
				t.Errorf("decideSnapshot = %d, want %d", got, tc.want)
			}
		})
	}
}

// notReadyThenReady: the first creation pod cuts the snapshot but says it
// is not ready to use yet; the content records it not ready, and the
// second pod (a re-check) finds it ready. Each pod runs once under faults.
func notReadyThenReady() scenario {
	sc := snapshotting(snapshotv1.VolumeSnapshotContentDelete)
	setup := sc.setup
	sc.setup = func(h *harness) {
		setup(h)
		h.notReadyChecks = 1
	}
	sc.attempts = 2
	return sc
}

func TestSnapshotNotReadyIsCheckedAgainSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, notReadyThenReady())
}

// A snapshot cut but not ready to use is recorded with its handle, not
// ready and without error, the being-created mark goes (nothing can leak),
// and after a backoff the creation pod checks it again; the creation time
// is the first pod's.
func TestSnapshotNotReadyIsCheckedAgain(t *testing.T) {
	h := newHarness(t, testObjects()...)
	sc := notReadyThenReady()
	sc.setup(h)
	drain(h.events)
	var first *snapshotv1.VolumeSnapshotContent
	for i := 0; i < 10 && first == nil; i++ {
		_ = h.contentStep()
		if c, err := h.content(); err == nil && statusHandle(c) != "" {
			first = c
		}
	}
	if first == nil {
		t.Fatalf("no snapshot recorded:\n%s", h.describe())
	}
	if _, creating := first.Annotations[annSnapshotBeingCreated]; contentReady(first) || first.Status.Error != nil || creating || first.Status.CreationTime == nil {
		t.Errorf("content %+v %+v, want the snapshot recorded not ready, without error or being-created mark", first.Annotations, first.Status)
	}
	if events := strings.Join(drain(h.events), "\n"); !strings.Contains(events, "not ready to use yet") {
		t.Errorf("events %q, want one saying the snapshot is not ready yet", events)
	}
	sc.run(t, h, 10)
	if pods := h.podsCreated(protocol.PhaseSnapshotCreation); len(pods) != 2 {
		t.Errorf("%d snapshot creation pods, want 2 (the second checks again)", len(pods))
	}
	if c, _ := h.content(); *c.Status.CreationTime != *first.Status.CreationTime {
		t.Errorf("creation time changed from %d to %d", *first.Status.CreationTime, *c.Status.CreationTime)
	}
}

// A deleted provisioner is kept while a VolumeSnapshotContent of its with
// deletionPolicy Delete exists (PaV deletes that snapshot when the content
// goes), as while its PVs exist; Retain contents do not hold it.
func TestProvisionerKeptWhileItsDeleteContentsExist(t *testing.T) {
	for _, policy := range []snapshotv1.DeletionPolicy{snapshotv1.VolumeSnapshotContentDelete, snapshotv1.VolumeSnapshotContentRetain} {
		t.Run(string(policy), func(t *testing.T) {
			h := newHarness(t, contentFixture(policy))
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
			held := func() bool {
				p, err := h.pav.PavV1alpha1().PavProvisioners().Get(ctx, testProvisioner, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				h.prov = p
				return protocol.HasFinalizer(p, protocol.FinalizerProvisioner)
			}
			if got, want := held(), policy == snapshotv1.VolumeSnapshotContentDelete; got != want {
				t.Fatalf("provisioner held %v with a %s content, want %v", got, policy, want)
			}
			if policy == snapshotv1.VolumeSnapshotContentRetain {
				return
			}
			if c := meta.FindStatusCondition(h.prov.Status.Conditions, v1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, "1 VolumeSnapshotContent(s)") {
				t.Errorf("Ready condition %+v, want one counting the content", c)
			}
			// Gone: deleted, and released by PaV and the snapshot-controller.
			c, err := h.content()
			if err != nil {
				t.Fatal(err)
			}
			c.Finalizers = nil
			if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := h.snap.SnapshotV1().VolumeSnapshotContents().Delete(ctx, testContent, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.syncProvisioner()
			if held() {
				t.Errorf("provisioner still held once its content is gone")
			}
		})
	}
}

// A content deleted while its failed creation waits out its backoff is
// released at once, as csi-snapshotter does: the release runs no pod.
func TestContentDeletedDuringCreationBackoffIsReleased(t *testing.T) {
	h := newHarness(t, testObjects()...)
	provisioning.run(t, h, 10)
	ctx := context.Background()
	content := contentFixture(snapshotv1.VolumeSnapshotContentDelete)
	class := "gone"
	content.Spec.VolumeSnapshotClassName = &class
	if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Create(ctx, content, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.refresh()
	if err := h.c.syncContent(ctx, testContent); !isRetryScheduled(err) {
		t.Fatalf("creation without its class: %v", err)
	}
	markContentDeleted(h)
	h.refresh() // no time passes: the creation's backoff still runs
	if err := h.c.syncContent(ctx, testContent); err != nil {
		t.Fatalf("sync of the deleted content: %v", err)
	}
	if _, err := h.content(); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted content stays until the creation's backoff ends: %v\n%s", err, h.describe())
	}
}
