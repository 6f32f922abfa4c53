package protocol

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
)

func failedPod(ann map[string]string, statuses ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: ann},
		Status:     corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: statuses},
	}
}

func exited(name string, code int32, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, Reason: "Error"}}}
}

// fromLogs gives every container of pod terminationMessagePolicy
// FallbackToLogsOnError, so its messages may come from its log.
func fromLogs(pod *corev1.Pod) *corev1.Pod {
	for _, cs := range pod.Status.ContainerStatuses {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: cs.Name, TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError})
	}
	return pod
}

func TestFailureMessage(t *testing.T) {
	pavError := func(pod *corev1.Pod) string { return pod.Annotations[AnnotationResultError] }
	logs := func(string) (string, error) { return "line1\nline2\n", nil }
	noLogs := func(string) (string, error) { return "", errors.New("no kubelet") }
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		logs func(string) (string, error)
		want string
	}{
		{"pav error file wins", failedPod(map[string]string{AnnotationResultError: "disk full\n"}, exited("c", 1, "msg")), logs, "disk full"},
		{"termination message", failedPod(nil, exited("ok", 0, ""), exited("c", 3, "bad param\n")), logs, `container "c" exited with code 3: bad param`},
		{"log tail", failedPod(nil, exited("c", 2, "")), logs, "container \"c\" exited with code 2; last lines of its log:\nline1\nline2"},
		{"exit code only", failedPod(nil, exited("c", 2, "")), noLogs, `container "c" exited with code 2`},
		{"pod reason", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "too slow"}}, logs, "pod ns/p failed: DeadlineExceeded: too slow"},
		{"nothing known", failedPod(nil), logs, "pod ns/p failed"},
		{"no logs: no log tail", failedPod(nil, exited("c", 2, "")), nil, `container "c" exited with code 2`},
		{"no logs: a message taken from the log is left out", fromLogs(failedPod(nil, exited("c", 2, "password=hunter2"))), nil, `container "c" exited with code 2`},
		{"logs: a message taken from the log is used", fromLogs(failedPod(nil, exited("c", 2, "password=hunter2"))), logs, `container "c" exited with code 2: password=hunter2`},
		{"no logs: a message the container wrote is used", failedPod(nil, exited("c", 2, "bad param")), nil, `container "c" exited with code 2: bad param`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureMessage(tc.pod, pavError(tc.pod), tc.logs); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeletePod(t *testing.T) {
	ctx := context.Background()
	mk := func(name string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid")},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: phase}}
		if deleting {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	done, running, stopping := mk("done", corev1.PodSucceeded, false), mk("running", corev1.PodRunning, false), mk("stopping", corev1.PodRunning, true)
	kube := fake.NewSimpleClientset(done, running, stopping)
	var graces = map[string]*int64{}
	kube.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		graces[d.GetName()] = d.GetDeleteOptions().GracePeriodSeconds
		if uid := d.GetDeleteOptions().Preconditions.UID; uid == nil || string(*uid) != d.GetName()+"-uid" {
			t.Errorf("delete of %s without its UID as precondition", d.GetName())
		}
		return false, nil, nil
	})
	pods := kube.CoreV1().Pods("ns")
	for _, p := range []*corev1.Pod{done, running, stopping} {
		if err := DeletePod(ctx, pods, p); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	if g := graces["done"]; g == nil || *g != 0 {
		t.Errorf("a terminated pod is deleted at once; grace %v", g)
	}
	if g, ok := graces["running"]; !ok || g != nil {
		t.Errorf("a running pod keeps its grace period; deleted: %v, grace %v", ok, g)
	}
	if _, ok := graces["stopping"]; ok {
		t.Error("a pod already stopping is deleted again")
	}
	if err := DeletePod(ctx, pods, done); err != nil {
		t.Errorf("a pod already gone: %v", err)
	}
}

// DeletePod removes FinalizerResult first, on the version it was given; a
// held pod someone else deleted then goes, and is not deleted again.
func TestDeletePodReleasesTheResultFinalizer(t *testing.T) {
	ctx := context.Background()
	now := metav1.Now()
	held := func(name string, deleted bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), ResourceVersion: "5",
			Finalizers: []string{"example.com/other", FinalizerResult}},
			Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if deleted {
			p.DeletionTimestamp = &now
		}
		return p
	}
	running, deleted, stale := held("running", false), held("deleted", true), held("stale", false)
	kube := fake.NewSimpleClientset(running, deleted, stale)
	var log []string
	kube.PrependReactor("*", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a := a.(type) {
		case k8stesting.PatchAction:
			log = append(log, "patch "+a.GetName()+" "+string(a.GetPatch()))
			if a.GetName() == "stale" {
				return true, nil, apierrors.NewConflict(corev1.Resource("pods"), "stale", errors.New("changed"))
			}
		case k8stesting.DeleteAction:
			log = append(log, "delete "+a.GetName())
		}
		return false, nil, nil
	})
	pods := kube.CoreV1().Pods("ns")
	for _, p := range []*corev1.Pod{running, deleted} {
		if err := DeletePod(ctx, pods, p); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}
	want := []string{
		`patch running {"metadata":{"finalizers":["example.com/other"],"resourceVersion":"5"}}`, "delete running",
		`patch deleted {"metadata":{"finalizers":["example.com/other"],"resourceVersion":"5"}}`,
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if err := DeletePod(ctx, pods, stale); !apierrors.IsConflict(err) {
		t.Errorf("a conflict on the finalizer: %v", err)
	}
	if got, _ := pods.Get(ctx, "stale", metav1.GetOptions{}); got.DeletionTimestamp != nil {
		t.Error("a pod whose finalizer could not be removed was deleted")
	}
}

func TestSucceededAndTerminated(t *testing.T) {
	recorded := map[string]string{AnnotationSucceeded: "true"}
	for _, tt := range []struct {
		phase                 corev1.PodPhase
		ann                   map[string]string
		succeeded, terminated bool
	}{
		{corev1.PodRunning, nil, false, false},
		{corev1.PodSucceeded, nil, true, true},
		{corev1.PodFailed, nil, false, true},
		{corev1.PodRunning, recorded, true, true}, // the node plugin heard it from the runtime first
		{corev1.PodFailed, recorded, true, true},  // the recorded success is final
		{corev1.PodRunning, map[string]string{AnnotationSucceeded: "false"}, false, false},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tt.ann}, Status: corev1.PodStatus{Phase: tt.phase}}
		if got := Succeeded(pod); got != tt.succeeded {
			t.Errorf("phase %s, annotations %v: Succeeded = %v, want %v", tt.phase, tt.ann, got, tt.succeeded)
		}
		if got := Terminated(pod); got != tt.terminated {
			t.Errorf("phase %s, annotations %v: Terminated = %v, want %v", tt.phase, tt.ann, got, tt.terminated)
		}
	}
}

// A pod deleted before it was scheduled never runs: it has ended (a
// finalizer would otherwise keep it waiting for a kubelet forever).
func TestNeverRan(t *testing.T) {
	now := metav1.Now()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", DeletionTimestamp: &now}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if !NeverRan(pod) || !Terminated(pod) || Succeeded(pod) {
		t.Errorf("deleted unscheduled pod: NeverRan %v Terminated %v Succeeded %v", NeverRan(pod), Terminated(pod), Succeeded(pod))
	}
	if got := FailureMessage(pod, "", nil); got != "pod ns/p was deleted before it was scheduled" {
		t.Errorf("message %q", got)
	}
	pod.Spec.NodeName = "node-1"
	if NeverRan(pod) || Terminated(pod) {
		t.Error("a scheduled pod being deleted is up to its kubelet")
	}
}
