package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// ListWatcher is the List+Watch pair every typed client has, e.g.
// Client.CoreV1().Pods(ns), Client.CoreV1().PersistentVolumeClaims(ns) or the
// PavProvisioner client of crds/v1alpha1.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// nameListWatch restricts a ListWatcher to the object called name.
func nameListWatch[L runtime.Object](ctx context.Context, c ListWatcher[L], name string) cache.ListerWatcher {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	return &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Watch(ctx, o)
		},
	}
}

// WaitFor watches the object called name until cond returns true (returning the
// object) or an error, or until timeout. It also returns an error if the object
// is deleted. If the object does not exist yet, WaitFor waits for it to appear.
//
//	pvc, err := framework.WaitFor(ctx, c.CoreV1().PersistentVolumeClaims(ns), "data", time.Minute,
//		func(pvc *corev1.PersistentVolumeClaim) (bool, error) { return pvc.Status.Phase == corev1.ClaimBound, nil })
func WaitFor[T runtime.Object, L runtime.Object](ctx context.Context, c ListWatcher[L], name string, timeout time.Duration, cond func(T) (bool, error)) (T, error) {
	var last T
	seen := false
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := watchtools.UntilWithSync(ctx, nameListWatch(ctx, c, name), nil, nil, func(ev watch.Event) (bool, error) {
		switch ev.Type {
		case watch.Added, watch.Modified:
			obj, ok := ev.Object.(T)
			if !ok {
				return false, fmt.Errorf("unexpected object %T while waiting for %s", ev.Object, name)
			}
			last, seen = obj, true
			return cond(obj)
		case watch.Deleted:
			return false, fmt.Errorf("%s was deleted while waiting for it", name)
		case watch.Error:
			return false, fmt.Errorf("watching %s: %v", name, ev.Object)
		}
		return false, nil
	})
	if err != nil {
		if errors.Is(err, watchtools.ErrWatchClosed) || ctx.Err() != nil {
			err = fmt.Errorf("timed out after %v", timeout)
		}
		if !seen {
			return last, fmt.Errorf("waiting for %s: %w (it never existed)", name, err)
		}
		return last, fmt.Errorf("waiting for %s: %w; last status: %s", name, err, statusOf(last))
	}
	return last, nil
}

// WaitForDeletion waits until the object called name does not exist.
func WaitForDeletion[L runtime.Object](ctx context.Context, c ListWatcher[L], name string) error {
	_, err := watchtools.UntilWithSync(ctx, nameListWatch(ctx, c, name), nil,
		func(store cache.Store) (bool, error) { return len(store.List()) == 0, nil },
		func(ev watch.Event) (bool, error) { return ev.Type == watch.Deleted, nil })
	if err != nil {
		return fmt.Errorf("waiting for deletion of %s: %w", name, err)
	}
	return nil
}

// statusOf renders an object's .status (or the whole object) as JSON for error messages.
func statusOf(obj runtime.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return fmt.Sprintf("%v", obj)
	}
	var v any = u
	if s, ok := u["status"]; ok {
		v = s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// PodCondition decides whether a pod is where a test wants it; an error stops the wait.
type PodCondition func(*corev1.Pod) (bool, error)

// WaitForPod waits for cond on a pod.
func WaitForPod(ctx context.Context, c kubernetes.Interface, ns, name string, timeout time.Duration, cond PodCondition) (*corev1.Pod, error) {
	pod, err := WaitFor(ctx, c.CoreV1().Pods(ns), name, timeout, func(p *corev1.Pod) (bool, error) { return cond(p) })
	if err != nil {
		return pod, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}

// PodSucceeded is true once the pod has Succeeded; Failed is an error.
func PodSucceeded(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return true, nil
	case corev1.PodFailed:
		return false, fmt.Errorf("pod failed: %s", terminationSummary(p))
	}
	return false, nil
}

// PodRunningReady is true once the pod is Running with condition Ready; a
// terminated pod is an error.
func PodRunningReady(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, fmt.Errorf("pod terminated (%s) while waiting for it to be ready: %s", p.Status.Phase, terminationSummary(p))
	case corev1.PodRunning:
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
	}
	return false, nil
}

// PodPhase is true once the pod is in the given phase.
func PodPhase(phase corev1.PodPhase) PodCondition {
	return func(p *corev1.Pod) (bool, error) { return p.Status.Phase == phase, nil }
}

func terminationSummary(p *corev1.Pod) string {
	var parts []string
	if p.Status.Message != "" {
		parts = append(parts, p.Status.Message)
	}
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if t := s.State.Terminated; t != nil {
			parts = append(parts, fmt.Sprintf("container %s exited %d (%s) %s", s.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message)))
		}
	}
	return strings.Join(parts, "; ")
}

// WaitForServiceAccount waits until a ServiceAccount exists (the API server
// refuses pods in a namespace until its "default" ServiceAccount exists).
func WaitForServiceAccount(ctx context.Context, c kubernetes.Interface, ns, name string, timeout time.Duration) error {
	_, err := WaitFor(ctx, c.CoreV1().ServiceAccounts(ns), name, timeout, func(*corev1.ServiceAccount) (bool, error) { return true, nil })
	if err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// Eventually polls cond every 500 ms until it holds, failing t once timeout
// has passed; cond's state (the last one not empty) says where it stood.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != "" {
			last = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s (last state: %s)", timeout, what, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
