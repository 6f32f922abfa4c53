//go:build benchcluster

package benchcluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/albertofaria/pav/protocol"
)

// A recorder watches the benchmark namespace's pods and claims, and the PVs
// bound to its claims, and notes when this process first saw each milestone
// (the watch event's arrival: milliseconds, where the objects' own timestamps
// have whole seconds). Milestones are keys such as "pod-ready/<name>"; wait
// returns a milestone's time, waiting for it if it has not happened yet.
type recorder struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	ready map[string]chan struct{}
	names map[string]string // phase pod milestone → the pod's name
}

// Milestone keys. Phase pods are keyed by their subject: staging and
// unstaging pods by their client pod's UID (from kubelet's target path),
// the others by their claim's name.
func podAdded(name string) string        { return "pod-added/" + name }
func podReady(name string) string        { return "pod-ready/" + name }
func podSucceeded(name string) string    { return "pod-succeeded/" + name }
func podDeleted(name string) string      { return "pod-deleted/" + name }
func claimBound(name string) string      { return "claim-bound/" + name }
func claimDeleted(name string) string    { return "claim-deleted/" + name }
func pvAdded(claim string) string        { return "pv-added/" + claim }
func pvDeleted(claim string) string      { return "pv-deleted/" + claim }
func creationExited(claim string) string { return "creation-exited/" + claim }
func phasePodAdded(phase protocol.Phase, subject string) string {
	return fmt.Sprintf("%s-added/%s", phase, subject)
}
func phasePodSucceeded(phase protocol.Phase, subject string) string {
	return fmt.Sprintf("%s-succeeded/%s", phase, subject)
}

// startRecorder starts the watches and returns once their caches have synced.
func startRecorder(ctx context.Context, c kubernetes.Interface, ns string) (*recorder, error) {
	r := &recorder{seen: map[string]time.Time{}, ready: map[string]chan struct{}{}, names: map[string]string{}}
	pods := informer(ctx, c.CoreV1().Pods(ns), &corev1.Pod{}, r.pod)
	claims := informer(ctx, c.CoreV1().PersistentVolumeClaims(ns), &corev1.PersistentVolumeClaim{}, r.claim)
	pvs := informer(ctx, c.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, func(obj any, deleted bool) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.Namespace == ns {
			if deleted {
				r.mark(pvDeleted(pv.Spec.ClaimRef.Name))
			} else {
				r.mark(pvAdded(pv.Spec.ClaimRef.Name))
				if at, ok := handleTime(pv); ok {
					r.markAt(creationExited(pv.Spec.ClaimRef.Name), at)
				}
			}
		}
	})
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, claims.HasSynced, pvs.HasSynced) {
		return nil, fmt.Errorf("the benchmark's watches did not sync")
	}
	return r, nil
}

// lister is the List+Watch pair of a typed client.
type lister[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// informer runs an informer (no resync) calling handle on every add, update
// and delete (deleted set), until ctx ends.
func informer[L runtime.Object](ctx context.Context, c lister[L], obj runtime.Object, handle func(obj any, deleted bool)) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return c.Watch(ctx, o) },
	}
	inf := cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { handle(o, false) },
		UpdateFunc: func(_, o any) { handle(o, false) },
		DeleteFunc: func(o any) {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			handle(o, true)
		},
	})
	go inf.Run(ctx.Done())
	return inf
}

func (r *recorder) pod(obj any, deleted bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	phase := protocol.Phase(p.Labels[protocol.LabelPhase])
	subject := ""
	switch phase {
	case "":
	case protocol.PhaseStaging, protocol.PhaseUnstaging:
		subject = podUIDInPath(p.Annotations[protocol.AnnotationTargetPath])
	default:
		_, subject, _ = strings.Cut(p.Annotations[protocol.AnnotationClaim], "/")
	}
	// a deleted pod's final state may hold changes not seen before
	if !deleted {
		r.mark(podAdded(p.Name))
		if subject != "" {
			r.markPod(phasePodAdded(phase, subject), p.Name)
		}
	}
	if p.Status.Phase == corev1.PodSucceeded {
		r.mark(podSucceeded(p.Name))
		if subject != "" {
			r.markPod(phasePodSucceeded(phase, subject), p.Name)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			r.mark(podReady(p.Name))
		}
	}
	if deleted {
		r.mark(podDeleted(p.Name))
	}
}

// handleTime is when the creation pod of a PV finished, by its own clock:
// testdata's bench-create ends its volumes' handles with "@$EPOCHREALTIME".
// (A pod's status cannot tell: PaV may delete the pod before kubelet
// reports it.)
func handleTime(pv *corev1.PersistentVolume) (time.Time, bool) {
	if pv.Spec.CSI == nil {
		return time.Time{}, false
	}
	_, epoch, ok := strings.Cut(pv.Spec.CSI.VolumeHandle, "@")
	if !ok {
		return time.Time{}, false
	}
	return parseEpoch(epoch)
}

// parseEpoch parses bash's $EPOCHREALTIME (seconds, 6 decimals).
func parseEpoch(s string) (time.Time, bool) {
	sec, frac, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok || len(frac) != 6 {
		return time.Time{}, false
	}
	whole, err1 := strconv.ParseInt(sec, 10, 64)
	micros, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, false
	}
	return time.Unix(whole, micros*1000), true
}

// podUIDInPath is the pod UID in a kubelet path such as
// /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount.
func podUIDInPath(path string) string {
	parts := strings.Split(path, "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "pods" {
			return parts[i+1]
		}
	}
	return ""
}

func (r *recorder) claim(obj any, deleted bool) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	switch {
	case !ok:
	case deleted:
		r.mark(claimDeleted(pvc.Name))
	case pvc.Status.Phase == corev1.ClaimBound:
		r.mark(claimBound(pvc.Name))
	}
}

// markPod marks a phase pod's milestone and remembers the pod's name.
func (r *recorder) markPod(key, pod string) {
	r.mu.Lock()
	if _, ok := r.names[key]; !ok {
		r.names[key] = pod
	}
	r.mu.Unlock()
	r.mark(key)
}

// seenAt is when a milestone was seen, if it was.
func (r *recorder) seenAt(key string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[key]
	return at, ok
}

// name is the pod of a phase pod's milestone that was seen.
func (r *recorder) name(key string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[key]
}

// mark records the first time a milestone was seen.
func (r *recorder) mark(key string) { r.markAt(key, time.Now()) }

// markAt records a milestone that happened at a known time.
func (r *recorder) markAt(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[key]; ok {
		return
	}
	r.seen[key] = now
	if ch, ok := r.ready[key]; ok {
		close(ch)
	} else {
		ch = make(chan struct{})
		close(ch)
		r.ready[key] = ch
	}
}

// wait returns when a milestone was first seen, waiting up to timeout for it.
func (r *recorder) wait(ctx context.Context, key string, timeout time.Duration) (time.Time, error) {
	r.mu.Lock()
	ch, ok := r.ready[key]
	if !ok {
		ch = make(chan struct{})
		r.ready[key] = ch
	}
	r.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(timeout):
		return time.Time{}, fmt.Errorf("%s not seen within %v", key, timeout)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key], nil
}
