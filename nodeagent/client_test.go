package nodeagent

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/nodeagent/volstats"
	"github.com/albertofaria/pav/protocol"
)

// publishForClient publishes at a target path that names no pod (kubelet
// layouts PaV cannot parse) for a running client pod that kubelet named in
// the request, and returns the staging pod.
func publishForClient(t *testing.T, f *stagerFixture, client *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	f.target = filepath.Join(t.TempDir(), "no-pod-here", "mount")
	if _, err := f.kube.CoreV1().Pods(client.Namespace).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := async(func() error {
		return f.stager.Publish(ctx, testDriver, &pavcsi.PublishRequest{VolumeID: testHandle, TargetPath: f.target, ClientPodUID: client.UID})
	})
	staging := f.waitForPod(protocol.PhaseStaging)
	mkdir(t, hostDir(t, staging, f.root), "volume")
	f.setPhase(staging, corev1.PodSucceeded, 0)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := protocol.PublicationOf(staging).ClientPodUID; got != client.UID {
		t.Fatalf("staging pod records client %q, want %q", got, client.UID)
	}
	return staging
}

func newClientPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: "ns", UID: "0f6f8a3e-7c1b-4d0a-9a51-2b8d3c4e5f60"},
		Spec: corev1.PodSpec{NodeName: "node1"}}
}

// The abandoned sweep judges a staging by the client pod kubelet named when
// it published, not by parsing the target path.
func TestSweepFollowsTheRecordedClientPod(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	client := newClientPod()
	id := publishForClient(t, f, client).Labels[protocol.LabelStagingID]
	if gone := f.stager.sweepAbandoned(ctx, nil); len(gone) != 0 {
		t.Fatalf("sweep with the client pod running: gone = %v", gone)
	}
	if err := f.kube.CoreV1().Pods("ns").Delete(ctx, client.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if gone := f.stager.sweepAbandoned(ctx, nil); !gone[id] {
		t.Fatalf("sweep after the client pod went: gone = %v, want %s", gone, id)
	}
}

// An abnormal volume's Event goes to the client pod the staging records.
func TestAbnormalVolumeEventGoesToTheRecordedClientPod(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	events := record.NewFakeRecorder(10)
	f.stager.recorder = events
	id := publishForClient(t, f, newClientPod()).Labels[protocol.LabelStagingID]
	f.stager.health.observe(ctx, f.stager, id, testDriver, f.target, &pavcsi.VolumeStats{Abnormal: true, Reason: volstats.ReasonVolumeUnreachable, Message: "gone"})
	close(events.Events)
	if n := len(events.Events); n != 1 {
		t.Fatalf("%d Events on the client pod, want 1", n)
	}
}

// Recovery and rollout make the new staging pod from the old one's record:
// the client pod carries over.
func TestRepublishKeepsTheClientPod(t *testing.T) {
	f := newStagerFixture(t, nil)
	client := newClientPod()
	req, err := f.stager.republishRequest(publishForClient(t, f, client))
	if err != nil {
		t.Fatal(err)
	}
	if req.ClientPodUID != client.UID {
		t.Errorf("republished for client %q, want %q", req.ClientPodUID, client.UID)
	}
}
