package nodeagent

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/protocol"
)

// A kubelet that restarts while unpublishing for a client pod that is gone
// never calls NodeUnpublishVolume again (the chaos soak found a volume whose
// deletion waited forever on its staging pod). The sweep unstages it, but
// only once the client pod has been gone for two sweeps.
func TestSweepUnstagesAbandonedStaging(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	const clientUID = "0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f60"
	f.target = filepath.Join(t.TempDir(), "pods", clientUID, "volumes", "kubernetes.io~csi", "pvc-claim-uid", "mount")
	client := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "ns", UID: clientUID}, Spec: corev1.PodSpec{NodeName: "node1"}}
	if _, err := f.kube.CoreV1().Pods("ns").Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := async(func() error { return f.publish(ctx) })
	staging := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, staging, f.root), "volume")
	f.setPhase(staging, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	id := staging.Labels[protocol.LabelStagingID]

	if gone := f.stager.sweepAbandoned(ctx, nil); len(gone) != 0 {
		t.Fatalf("sweep with the client pod running: gone = %v", gone)
	}
	if err := f.kube.CoreV1().Pods("ns").Delete(ctx, client.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone := f.stager.sweepAbandoned(ctx, nil)
	if !gone[id] {
		t.Fatalf("first sweep after the client pod went: gone = %v, want %s", gone, id)
	}
	if n := len(f.pods()); n != 1 || len(f.mounter.MountPoints) != 1 {
		t.Fatalf("the first sweep acted: %d pods, mounts %+v", n, f.mounter.MountPoints)
	}

	f.stager.sweepAbandoned(ctx, gone)
	f.setPhase(f.waitForPod(protocol.PhaseUnstaging), corev1.PodSucceeded, 0)
	f.stager.abandoned.wg.Wait()
	if n := len(f.pods()); n != 0 {
		t.Errorf("%d pods left after the second sweep", n)
	}
	if len(f.mounter.MountPoints) != 0 {
		t.Errorf("mounts left: %+v", f.mounter.MountPoints)
	}
	// kubelet calling after all is answered as before.
	if err := f.stager.Unpublish(ctx, testDriver, testHandle, f.target); err != nil {
		t.Fatal(err)
	}
}

// One abandoned staging whose unstaging never ends (its pod never completes,
// as when a FUSE daemon hangs) holds up neither another abandoned staging nor
// the next sweeps, and is not unpublished twice at once.
func TestSweepUnstagesAbandonedStagingsIndependently(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	var ids []string
	for i := range 2 {
		target := filepath.Join(t.TempDir(), "pods", fmt.Sprintf("0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f6%d", i), "volumes", "kubernetes.io~csi", "pvc-claim-uid", "mount")
		done := async(func() error {
			return f.stager.Publish(ctx, testDriver, &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: target})
		})
		staging := f.podsOf(protocol.PhaseStaging, i+1)[i]
		mkdir(t, hostDir(t, staging, f.root), "volume")
		f.setPhase(staging, corev1.PodSucceeded, 0)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		ids = append(ids, staging.Labels[protocol.LabelStagingID])
	}

	gone := f.stager.sweepAbandoned(ctx, nil) // no client pod exists
	f.stager.sweepAbandoned(ctx, gone)
	unstaging := f.podsOf(protocol.PhaseUnstaging, 2) // both at once
	hung, finishing := unstaging[0], unstaging[1]
	f.setPhase(finishing, corev1.PodSucceeded, 0)
	for deadline := time.Now().Add(testwait.Timeout); len(f.pods()) != 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the staging whose unstaging finished is not cleaned up: %d pods left, want the other's 2", len(f.pods()))
		}
	}
	f.stager.sweepAbandoned(ctx, gone)
	if f.stager.abandoned.start(hung.Labels[protocol.LabelStagingID], func() {}) {
		t.Errorf("a second unpublish of the hung staging could start")
	}

	f.setPhase(hung, corev1.PodSucceeded, 0)
	f.stager.abandoned.wg.Wait()
	if n := len(f.pods()); n != 0 || len(f.mounter.MountPoints) != 0 {
		t.Errorf("left: %d pods, mounts %+v", n, f.mounter.MountPoints)
	}
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("staging IDs %v: want two different ones", ids)
	}
}

// podsOf waits until n pods of the phase exist and returns them by target path.
func (f *stagerFixture) podsOf(phase protocol.Phase, n int) []*corev1.Pod {
	f.t.Helper()
	for deadline := time.Now().Add(testwait.Timeout); ; time.Sleep(5 * time.Millisecond) {
		var found []*corev1.Pod
		for _, p := range f.pods() {
			if p.Labels[protocol.LabelPhase] == string(phase) {
				found = append(found, &p)
			}
		}
		if len(found) >= n {
			slices.SortFunc(found, func(a, b *corev1.Pod) int {
				return strings.Compare(a.Annotations[protocol.AnnotationTargetPath], b.Annotations[protocol.AnnotationTargetPath])
			})
			return found
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%d %s pods after 10 s, want %d", len(found), phase, n)
		}
	}
}
