package nodeagent

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	swept := make(chan map[string]bool, 1)
	go func() { swept <- f.stager.sweepAbandoned(ctx, gone) }()
	f.setPhase(f.waitForPod(protocol.PhaseUnstaging), corev1.PodSucceeded, 0)
	<-swept
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

func TestClientPodUID(t *testing.T) {
	const uid = "0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f60"
	for target, want := range map[string]string{
		"/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~csi/pvc-1/mount":                 uid,
		"/var/lib/k0s/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/" + uid:       uid,
		"/var/lib/kubelet/pods/not-a-uid/volumes/kubernetes.io~csi/pvc-1/mount":                   "",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-" + uid + "/x":      "",
		"/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-" + uid + "/" + uid: "",
	} {
		got, ok := clientPodUID(target)
		if string(got) != want || ok != (want != "") {
			t.Errorf("clientPodUID(%q) = %q, %v; want %q", target, got, ok, want)
		}
	}
}
