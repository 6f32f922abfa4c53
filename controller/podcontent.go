package controller

import (
	"context"
	"fmt"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
)

// Snapshots and group snapshots follow one protocol: a content object
// (VolumeSnapshotContent, VolumeGroupSnapshotContent) whose snapshot PaV
// cuts with a creation pod and deletes with a deletion pod, as
// csi-snapshotter's sidecar-controller does with a call to the driver for
// each. podContent is one sync of such a content with the steps both kinds
// take; snapshot.go and groupsnapshot.go keep what is each kind's own: the
// next step (decideSnapshot, decideGroupSnapshot), the phases' context and
// what a creation pod's results mean.

// contentObject is *VolumeSnapshotContent or *VolumeGroupSnapshotContent.
type contentObject[T any] interface {
	metav1.Object
	runtime.Object
	DeepCopy() T
}

// contentAPI is what PaV calls of a content kind's typed client.
type contentAPI[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// contentKind is what tells the two kinds apart in the steps they share;
// S is the kind's status type.
type contentKind[T contentObject[T], S any] struct {
	resource string // the kind's name, in errors and logs
	what     string // "snapshot" or "group snapshot", in Events
	// annBeingCreated is on a content while its creation pod may cut a
	// snapshot; finalizer is the snapshot-controller's, removed on release.
	annBeingCreated, finalizer              string
	reasonCreationFailed, reasonDeleteError string
	creation, deletion                      protocol.Phase
	pod                                     func(tmpl *corev1.PodTemplateSpec, provisioner, root string, phase protocol.Phase, content, uid string) *corev1.Pod
	driver                                  func(T) string
	handle                                  func(T) string // the snapshot the status records, "" if none
	ready                                   func(T) bool
	// status is the content's status, made empty if it has none.
	status func(T) *S
	// failed records a failed creation in a status.
	failed func(*S, *snapshotv1.VolumeSnapshotError)
}

// podContent is one sync of one content.
type podContent[T contentObject[T], S any] struct {
	kind    *contentKind[T, S]
	c       *Controller
	api     contentAPI[T]
	queue   workqueue.TypedRateLimitingInterface[string]
	backoff *backoff
	content T
	p       *v1alpha1.PavProvisioner
	pods    map[protocol.Phase]*corev1.Pod
}

func newPodContent[T contentObject[T], S any](c *Controller, kind *contentKind[T, S], api contentAPI[T], queue workqueue.TypedRateLimitingInterface[string], b *backoff) podContent[T, S] {
	return podContent[T, S]{kind: kind, c: c, api: api, queue: queue, backoff: b}
}

// open starts the sync of content name, read from the cache with get, and
// its pods. It is false when there is nothing to do: the content is gone or
// not PaV's (or its PavProvisioner does not exist yet), or a previous
// attempt's pod is still going (its deletion requeues the content).
func (s *podContent[T, S]) open(name string, get func(string) (T, error)) (bool, error) {
	content, err := get(name)
	if apierrors.IsNotFound(err) {
		s.backoff.succeeded(name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s.p = s.c.provisioner(s.kind.driver(content)); s.p == nil {
		return false, nil
	}
	s.content = content
	s.pods = byPhase(s.c.podsBy(indexSnapshotContent, protocol.LabelValue(string(content.GetUID()))))
	for _, pod := range s.pods {
		if protocol.Going(pod) {
			return false, nil
		}
	}
	return true, nil
}

// backingOff: the content waits for its backoff, which spaces out retries
// of failed pods and writes, and comes back after it. Releasing a deleted
// content runs no pod, and does not wait for a failed creation's next
// retry (csi-snapshotter releases it at once).
func (s *podContent[T, S]) backingOff(releasing bool) bool {
	name := s.content.GetName()
	if d := s.backoff.wait(name); d > 0 && !releasing {
		s.queue.AddAfter(name, d)
		return true
	}
	return false
}

func (s *podContent[T, S]) event(eventType, reason, format string, args ...interface{}) {
	s.c.recorder.Eventf(s.content, eventType, reason, format, args...)
}

// fail reports a failed creation attempt as csi-snapshotter does (an Event
// and the content's status.error, which the snapshot-controller copies to
// the VolumeSnapshot or VolumeGroupSnapshot) and schedules the next
// attempt with backoff.
func (s *podContent[T, S]) fail(ctx context.Context, format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	full := fmt.Sprintf("Failed to create %s: %s", s.kind.what, msg)
	s.event(corev1.EventTypeWarning, s.kind.reasonCreationFailed, "%s", full)
	if err := s.writeStatus(ctx, func(st *S) {
		s.kind.failed(st, &snapshotv1.VolumeSnapshotError{Time: ptrTo(metav1.Now()), Message: ptrTo(full)})
	}); err != nil {
		return err
	}
	return s.retryLater(msg)
}

func (s *podContent[T, S]) retryLater(msg string) error {
	name := s.content.GetName()
	d := s.backoff.failed(name)
	s.queue.AddAfter(name, d)
	return retryScheduled{fmt.Errorf("%s %s: %s (retrying in %v)", s.kind.resource, name, msg, d)}
}

// failedAttempt ends an attempt whose pod failed or wrote no usable handle:
// status and Event, then the mark and the pod go, and the next attempt
// waits for its backoff.
func (s *podContent[T, S]) failedAttempt(ctx context.Context, pod *corev1.Pod, msg string) error {
	if err := s.fail(ctx, "%s", msg); !isRetryScheduled(err) {
		return err
	}
	if err := s.removeBeingCreated(ctx); err != nil {
		return err
	}
	if err := s.c.deletePod(ctx, pod); err != nil {
		return err
	}
	return retryScheduled{fmt.Errorf("%s %s: %s", s.kind.resource, s.content.GetName(), msg)}
}

// reread reads the content again from the API server before a creation
// pod, and is false if it is gone or creates says it needs none: the
// contents' watch can lag the pods' one, so the cache may still show the
// content without the handle the last creation pod recorded while that pod
// is gone already; a second pod would cut a second snapshot and the first
// would leak. A cache behind is caught up by the watch, which requeues the
// content.
func (s *podContent[T, S]) reread(ctx context.Context, creates func(T) bool) (bool, error) {
	live, err := s.api.Get(ctx, s.content.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %s %s: %w", s.kind.resource, s.content.GetName(), err)
	}
	if !creates(live) {
		return false, nil
	}
	s.content = live
	return true, nil
}

// startCreation acts on the evaluation of spec.<section>, the creation
// phase: it creates the creation pod, after marking the content being
// created (as csi-snapshotter does before it asks the driver) unless the
// content records its snapshot already (a re-check cuts nothing that could
// leak).
func (s *podContent[T, S]) startCreation(ctx context.Context, section string, tmpl *corev1.PodTemplateSpec, ok bool, err error) error {
	switch {
	case !ok:
		return s.fail(ctx, "PavProvisioner %q cannot take %ss (it has no spec.%s)", s.p.Name, s.kind.what, section)
	case err != nil:
		return s.fail(ctx, "evaluating spec.%s of PavProvisioner %q: %v", section, s.p.Name, err)
	}
	if _, ok := s.content.GetAnnotations()[s.kind.annBeingCreated]; !ok && s.kind.handle(s.content) == "" {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"yes"}}}`, s.kind.annBeingCreated)
		if _, err := s.api.Patch(ctx, s.content.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("%s %s: marking it being created: %w", s.kind.resource, s.content.GetName(), err)
		}
	}
	return s.createPod(ctx, tmpl, s.kind.creation)
}

func (s *podContent[T, S]) createPod(ctx context.Context, tmpl *corev1.PodTemplateSpec, phase protocol.Phase) error {
	pod := s.kind.pod(tmpl, s.p.Name, s.c.podDirRoot(), phase, s.content.GetName(), string(s.content.GetUID()))
	squatter, err := s.c.createPod(ctx, pod)
	if squatter != nil {
		s.event(corev1.EventTypeWarning, reasonPodNameTaken, "%s", squatterMessage(squatter, phase))
	}
	return err
}

// finishedPod is the outcome of one of the content's pods once it is done
// (ok false: not yet, the content is requeued).
func (s *podContent[T, S]) finishedPod(ctx context.Context, pod *corev1.Pod) (podOutcome, bool) {
	return s.c.finishedPod(ctx, pod, podWaiter{obj: s.content, queue: s.queue, key: s.content.GetName()})
}

// deleteSnapshot runs the deletion pod, of the template evaluate gives
// (nil: the provisioner has none; evaluate reports its own failures), and
// once it succeeded clears the snapshot from the content's status with
// clear, as csi-snapshotter does after it deleted the snapshot; the next
// sync releases the content.
func (s *podContent[T, S]) deleteSnapshot(ctx context.Context, pod *corev1.Pod, evaluate func() (*corev1.PodTemplateSpec, error), clear func(*S)) error {
	if pod == nil {
		tmpl, err := evaluate()
		if err != nil {
			return err
		}
		if tmpl == nil {
			return s.writeStatus(ctx, clear)
		}
		return s.createPod(ctx, tmpl, s.kind.deletion)
	}
	r, ok := s.finishedPod(ctx, pod)
	if !ok {
		return nil
	}
	if !r.succeeded {
		return s.c.podFailed(ctx, pod, r.message, func(msg string) error { return s.deleteFailed("%s", msg) })
	}
	s.backoff.succeeded(s.content.GetName())
	return s.writeStatus(ctx, clear) // the pod goes with the release
}

func (s *podContent[T, S]) deleteFailed(format string, args ...interface{}) error {
	msg := fmt.Sprintf(format, args...)
	s.event(corev1.EventTypeWarning, s.kind.reasonDeleteError, "Failed to delete %s: %s", s.kind.what, msg)
	return s.retryLater(msg)
}

// release lets the content go: its pods, then the snapshot-controller's
// finalizer, once the API server shows no pod of the content that the
// sync did not see.
func (s *podContent[T, S]) release(ctx context.Context) error {
	if err := s.deletePods(ctx); err != nil {
		return err
	}
	if err := s.noPodsUnseen(ctx); err != nil {
		return err
	}
	if _, err := protocol.RemoveFinalizer(ctx, s.api.Patch, s.content, s.kind.finalizer); err != nil {
		return fmt.Errorf("%s %s: %w", s.kind.resource, s.content.GetName(), err)
	}
	return nil
}

// noPodsUnseen asks the API server for the content's pods before it is
// released: the pods' cache can lag the contents' one, so a creation pod
// created just before the content was marked for deletion may be missing
// from it, and a snapshot it cuts after the release would leak. Such a pod
// is an error: the sync is retried, and the pod's watch event requeues the
// content too.
func (s *podContent[T, S]) noPodsUnseen(ctx context.Context) error {
	selector := labels.Set{protocol.LabelSnapshotContentUID: protocol.LabelValue(string(s.content.GetUID()))}.AsSelector().String() + "," + protocol.LabelPhase
	live, err := s.c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return fmt.Errorf("%s %s: listing its pods before releasing it: %w", s.kind.resource, s.content.GetName(), err)
	}
	for i := range live.Items {
		pod := &live.Items[i]
		if seen := s.pods[phaseOf(pod)]; seen == nil || seen.UID != pod.UID {
			return fmt.Errorf("%s %s: its %s pod %s/%s is not in the pods' cache yet: the release waits for it",
				s.kind.resource, s.content.GetName(), phaseOf(pod), pod.Namespace, pod.Name)
		}
	}
	return nil
}

// deletePods removes the content's pods (their outcome has been acted on).
func (s *podContent[T, S]) deletePods(ctx context.Context) error {
	for _, pod := range s.pods {
		if err := s.c.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// statusEquality is apiequality.Semantic but for the time of a status
// error: a repeated failure with the same message is not news.
var statusEquality = func() conversion.Equalities {
	e := apiequality.Semantic.Copy()
	if err := e.AddFunc(func(a, b snapshotv1.VolumeSnapshotError) bool {
		return apiequality.Semantic.DeepEqual(a.Message, b.Message)
	}); err != nil {
		panic(err)
	}
	return e
}()

// writeStatus changes the content's status (on the version read; a
// conflict retries the sync) unless the change changes nothing.
func (s *podContent[T, S]) writeStatus(ctx context.Context, change func(*S)) error {
	updated := s.content.DeepCopy()
	change(s.kind.status(updated))
	// updated differs from the content in its status only; a content
	// without one always gets one.
	if statusEquality.DeepEqual(s.content, updated) {
		return nil
	}
	got, err := s.api.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("%s %s: updating its status: %w", s.kind.resource, s.content.GetName(), err)
	}
	klog.V(2).InfoS(s.kind.resource+" status updated", "content", s.content.GetName(), "handle", s.kind.handle(got), "ready", s.kind.ready(got))
	s.content = got
	return nil
}

func (s *podContent[T, S]) removeBeingCreated(ctx context.Context) error {
	if _, ok := s.content.GetAnnotations()[s.kind.annBeingCreated]; !ok {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, s.kind.annBeingCreated)
	got, err := s.api.Patch(ctx, s.content.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("%s %s: removing annotation %s: %w", s.kind.resource, s.content.GetName(), s.kind.annBeingCreated, err)
	}
	s.content = got
	return nil
}
