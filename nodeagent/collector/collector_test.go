package collector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
)

func pavPod(name string, phase protocol.Phase, podPhase corev1.PodPhase, hostDir string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default",
			Labels: map[string]string{protocol.LabelPhase: string(phase)},
		},
		Spec: corev1.PodSpec{
			NodeName: "node1",
			Volumes: []corev1.Volume{{
				Name:         protocol.PavVolumeName,
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir}},
			}},
		},
		Status: corev1.PodStatus{Phase: podPhase},
	}
}

func newTestCollector(t testing.TB, root string, pods ...*corev1.Pod) (*Collector, *fake.Clientset, *mount.FakeMounter) {
	t.Helper()
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	kube := fake.NewSimpleClientset(objs...)
	inf := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0, kubeclient.Selector{})
	m := mount.NewFakeMounter(nil)
	c := New(kube, inf, m, root, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kubeclient.Run(ctx, inf)
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return c, kube, m
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCollect(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name       string
		phase      protocol.Phase
		podPhase   corev1.PodPhase
		files      map[string]string
		symlinks   map[string]string
		preMounted bool
		want       map[string]string // expected annotations; nil = no patch
		dirGone    bool
	}{
		{
			name: "creation succeeded with handle and capacity", phase: protocol.PhaseCreation, podPhase: corev1.PodSucceeded,
			files: map[string]string{"handle": "vol-1\n", "capacity": " 1Gi \n", "error": ""},
			want: map[string]string{
				protocol.AnnotationResultsCollected: "true",
				protocol.AnnotationResultHandle:     "vol-1",
				protocol.AnnotationResultCapacity:   "1Gi",
			},
			dirGone: true,
		},
		{
			name: "validation failed with error file", phase: protocol.PhaseValidation, podPhase: corev1.PodFailed,
			files: map[string]string{"error": "size too large\n"},
			want: map[string]string{
				protocol.AnnotationResultsCollected: "true",
				protocol.AnnotationResultError:      "size too large",
			},
			dirGone: true,
		},
		{
			name: "expansion found infeasible, even with an empty file", phase: protocol.PhaseExpansion, podPhase: corev1.PodFailed,
			files: map[string]string{"infeasible": ""},
			want: map[string]string{
				protocol.AnnotationResultsCollected: "true",
				protocol.AnnotationResultInfeasible: "",
			},
			dirGone: true,
		},
		{
			name: "expansion found infeasible, with the reason", phase: protocol.PhaseExpansion, podPhase: corev1.PodFailed,
			files: map[string]string{"infeasible": "the pool holds at most 1Ti\n", "capacity": "5Ti"},
			want: map[string]string{
				protocol.AnnotationResultsCollected: "true",
				protocol.AnnotationResultInfeasible: "the pool holds at most 1Ti",
				protocol.AnnotationResultCapacity:   "5Ti",
			},
			dirGone: true,
		},
		{
			name: "symlinked handle is refused", phase: protocol.PhaseCreation, podPhase: corev1.PodSucceeded,
			symlinks: map[string]string{"handle": "/etc/hostname"},
			want: map[string]string{
				protocol.AnnotationResultsCollected: "true",
				protocol.AnnotationResultError:      "PaV refused to read the pod's results: [/pav/handle is a symbolic link; PaV only reads regular files]",
			},
			dirGone: true,
		},
		{
			name: "creation returned volume attributes", phase: protocol.PhaseCreation, podPhase: corev1.PodSucceeded,
			files: map[string]string{"volume-attributes": `{"bucketEndpoint": "http://10.0.0.7:7070"}` + "\n"},
			want: map[string]string{
				protocol.AnnotationResultsCollected:       "true",
				protocol.AnnotationResultVolumeAttributes: `{"bucketEndpoint": "http://10.0.0.7:7070"}`,
			},
			dirGone: true,
		},
		{
			name: "an empty attributes file is still reported", phase: protocol.PhaseCreation, podPhase: corev1.PodSucceeded,
			files: map[string]string{"volume-attributes": ""},
			want: map[string]string{
				protocol.AnnotationResultsCollected:       "true",
				protocol.AnnotationResultVolumeAttributes: "",
			},
			dirGone: true,
		},
		{
			name: "overlong attributes are cut one byte over the limit, for the controller to refuse", phase: protocol.PhaseCreation, podPhase: corev1.PodSucceeded,
			files: map[string]string{"volume-attributes": strings.Repeat("x", 3*protocol.MaxVolumeAttributesBytes)},
			want: map[string]string{
				protocol.AnnotationResultsCollected:       "true",
				protocol.AnnotationResultVolumeAttributes: strings.Repeat("x", protocol.MaxVolumeAttributesBytes+1),
			},
			dirGone: true,
		},
		{
			name: "symlinked attributes are refused, not taken for absent", phase: protocol.PhaseCreation, podPhase: corev1.PodSucceeded,
			symlinks: map[string]string{"volume-attributes": "/etc/hostname"},
			want: map[string]string{
				protocol.AnnotationResultsCollected:       "true",
				protocol.AnnotationResultVolumeAttributes: "",
				protocol.AnnotationResultError:            "PaV refused to read the pod's results: [/pav/volume-attributes is a symbolic link; PaV only reads regular files]",
			},
			dirGone: true,
		},
		{
			name: "leftover mount is unmounted before removal", phase: protocol.PhaseDeletion, podPhase: corev1.PodSucceeded,
			preMounted: true,
			want:       map[string]string{protocol.AnnotationResultsCollected: "true"},
			dirGone:    true,
		},
		{
			name: "running pod is left alone", phase: protocol.PhaseCreation, podPhase: corev1.PodRunning,
			files: map[string]string{"handle": "x"},
		},
		{
			name: "staging pod is left alone", phase: protocol.PhaseStaging, podPhase: corev1.PodSucceeded,
			files: map[string]string{"handle": "x"},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(root, "pod-"+string(rune('a'+i)))
			if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			for n, c := range tt.files {
				writeFile(t, filepath.Join(dir, n), c)
			}
			for n, target := range tt.symlinks {
				if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
			pod := pavPod("p", tt.phase, tt.podPhase, dir)
			c, kube, m := newTestCollector(t, root, pod)
			if tt.preMounted {
				m.MountPoints = []mount.MountPoint{{Device: "tmpfs", Path: filepath.Join(dir, "sub"), Type: "tmpfs"}}
			}
			if err := c.Collect(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			got, err := kube.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if len(got.Annotations) != 0 {
					t.Errorf("annotations = %v, want none", got.Annotations)
				}
			} else {
				for k, v := range tt.want {
					if got.Annotations[k] != v {
						t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
					}
				}
				if len(got.Annotations) != len(tt.want) {
					t.Errorf("annotations = %v, want %v", got.Annotations, tt.want)
				}
			}
			_, statErr := os.Stat(dir)
			if gone := os.IsNotExist(statErr); gone != tt.dirGone {
				t.Errorf("dir gone = %v, want %v", gone, tt.dirGone)
			}
			if tt.preMounted && len(m.MountPoints) != 0 {
				t.Errorf("mounts left: %v", m.MountPoints)
			}
		})
	}
}

func TestCollectRefusesDirOutsideRoot(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "handle"), "secret")
	pod := pavPod("p", protocol.PhaseCreation, corev1.PodSucceeded, outside)
	c, kube, _ := newTestCollector(t, root, pod)
	if err := c.Collect(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got, _ := kube.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	if got.Annotations[protocol.AnnotationResultHandle] != "" || got.Annotations[protocol.AnnotationResultsCollected] != "true" {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if _, err := os.Stat(filepath.Join(outside, "handle")); err != nil {
		t.Errorf("file outside the root was touched: %v", err)
	}
}

func TestReadResultFileCapsSize(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "error"), strings.Repeat("x", MaxErrorBytes+100))
	s, ok, err := ReadResultFile(dir, "error", MaxErrorBytes)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if !strings.HasSuffix(s, "(truncated)") || len(s) > MaxErrorBytes+20 {
		t.Errorf("len %d, suffix %q", len(s), s[len(s)-15:])
	}
}

func TestReadResultFileRefusesLongHandle(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "handle"), strings.Repeat("h", 5000))
	if _, ok, err := ReadResultFile(dir, "handle", maxHandleBytes); !ok || err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("ok=%v err=%v; want a refusal of the long handle, not a cut one", ok, err)
	}
}

func TestSweepOrphans(t *testing.T) {
	root := t.TempDir()
	used := filepath.Join(root, "used")
	oldOrphan := filepath.Join(root, "old-orphan")
	youngOrphan := filepath.Join(root, "young-orphan")
	for _, d := range []string{used, oldOrphan, youngOrphan} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{used, oldOrphan} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	c, _, _ := newTestCollector(t, root, pavPod("p", protocol.PhaseStaging, corev1.PodRunning, used))
	if err := c.SweepOrphans(time.Now()); err != nil {
		t.Fatal(err)
	}
	for d, wantExists := range map[string]bool{used: true, oldOrphan: false, youngOrphan: true} {
		_, err := os.Stat(d)
		if exists := err == nil; exists != wantExists {
			t.Errorf("%s exists = %v, want %v", filepath.Base(d), exists, wantExists)
		}
	}
}

// A creation pod deleted before its results were collected (the controller
// stopped waiting for a node plugin that was down) leaves its directory: it
// goes as soon as the deletion is seen, not at the next sweep. A staging
// pod's directory is the stager's and stays.
func TestDeletedPodDirectoryRemoved(t *testing.T) {
	root := t.TempDir()
	staging, creation := filepath.Join(root, "staging"), filepath.Join(root, "creation")
	for _, d := range []string{staging, creation} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c, kube, _ := newTestCollector(t, root,
		pavPod("s", protocol.PhaseStaging, corev1.PodRunning, staging),
		pavPod("c", protocol.PhaseCreation, corev1.PodRunning, creation))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx, 1)
	// The informer delivers the deletions in this order: once the creation
	// pod's directory is gone, the staging pod's deletion was seen too.
	for _, name := range []string{"s", "c"} {
		if err := kube.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(testwait.Timeout); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(creation); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deleted creation pod's directory was never removed")
		}
	}
	if _, err := os.Stat(staging); err != nil {
		t.Errorf("the staging pod's directory: %v, want it kept for the stager", err)
	}
}
