package nodeagent

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/kubeclient/fakeapi"
	"github.com/albertofaria/pav/protocol"
)

// stoppedStaging publishes a long-running staging whose pod then fails, as
// a killed daemon's does, and returns that pod.
func stoppedStaging(t *testing.T, f *stagerFixture) *corev1.Pod {
	t.Helper()
	fakeapi.HonorFinalizers(&f.kube.Fake, f.kube.Tracker(), corev1.SchemeGroupVersion.WithResource("pods"), time.Now)
	done, dir := f.publishLongRunning()
	writeFile(t, dir+"/ready", "")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	pod := f.waitForPod(protocol.PhaseStaging)
	f.setPhase(pod, corev1.PodFailed, 137)
	return pod
}

// A node plugin killed in the middle of a recovery loses nothing: until the
// new staging pod exists, the old one stays (stopped, unstaged) with the
// record of the recovery, which the new pod then carries.
func TestRestageKeepsTheRecordInAPod(t *testing.T) {
	f := newStagerFixture(t, nil)
	old := stoppedStaging(t, f)
	ctx := context.Background()
	rec := &recoveryRecord{Replaces: []string{"0:42:/"}, Clients: []types.UID{"client-uid"}, Since: time.Now()}
	if err := f.stager.recordRecovery(ctx, old, rec); err != nil {
		t.Fatal(err)
	}
	var killed atomic.Bool
	killed.Store(true)
	f.kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pod := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
		if killed.Load() && pod.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
			return true, nil, errors.New("the node plugin was killed")
		}
		return false, nil, nil
	})
	req, err := f.stager.republishRequest(old)
	if err != nil {
		t.Fatal(err)
	}
	id := old.Labels[protocol.LabelStagingID]
	if err := f.stager.restage(ctx, testDriver, id, old, req, publishOptions{rec: rec}); err == nil {
		t.Fatal("restage succeeded though the new pod could not be created")
	}
	kept, err := f.kube.CoreV1().Pods(old.Namespace).Get(ctx, old.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the old staging pod is gone before its replacement exists: %v", err)
	}
	if kept.DeletionTimestamp == nil || kept.Annotations[protocol.AnnotationUnstaged] != "true" {
		t.Errorf("the old staging was not stopped and unstaged first: deleted %v, annotations %v", kept.DeletionTimestamp, kept.Annotations)
	}
	if _, ok := kept.Annotations[protocol.AnnotationRecovering]; !ok {
		t.Errorf("the old staging pod lost the recovery record: %v", kept.Annotations)
	}

	// The next attempt (a restarted node plugin reads the record back).
	killed.Store(false)
	rec, err = recoveryOf(kept)
	if err != nil || rec == nil {
		t.Fatalf("record read back: %v, %v", rec, err)
	}
	if err := f.stager.restage(ctx, testDriver, id, kept, req, publishOptions{rec: rec}); err != nil {
		t.Fatal(err)
	}
	pods := f.pods()
	if len(pods) != 1 || !strings.HasPrefix(pods[0].Name, old.Name+"-") {
		t.Fatalf("after the restage: pods %v, want only the new staging pod", podNames(pods))
	}
	if got, _ := recoveryOf(&pods[0]); got == nil || got.Clients[0] != "client-uid" {
		t.Errorf("the new staging pod does not carry the record: %v", pods[0].Annotations)
	}
}

// A recovery whose clients went while no node plugin ran ends with the old
// staging torn down, not restaged.
func TestRecoveryWithoutClientsTearsDown(t *testing.T) {
	f := newStagerFixture(t, nil)
	old := stoppedStaging(t, f)
	ctx := context.Background()
	rec := &recoveryRecord{Replaces: []string{"0:42:/"}, Clients: []types.UID{"client-uid"}, Since: time.Now()}
	if err := f.stager.recordRecovery(ctx, old, rec); err != nil {
		t.Fatal(err)
	}
	id := old.Labels[protocol.LabelStagingID]
	// until the node plugin's cache shows the record and the failure
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, testwait.Timeout, true, func(ctx context.Context) (bool, error) {
		cached, err := f.stager.nodePods.Find(ctx, protocol.PhaseStaging, id)
		if err != nil || cached == nil {
			return false, err
		}
		_, ok := cached.Annotations[protocol.AnnotationRecovering]
		return ok && cached.Status.Phase == corev1.PodFailed, nil
	}); err != nil {
		t.Fatalf("the cache never showed the recorded, failed staging pod: %v", err)
	}
	if err := f.stager.recover(ctx, id); err != nil {
		t.Fatal(err)
	}
	if pods := f.pods(); len(pods) != 0 {
		t.Fatalf("pods left: %v", podNames(pods))
	}
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// The recovery worker is one goroutine for the node: reading a block
// volume's device number at a target whose file system hangs (a FUSE daemon
// that stopped answering) returns an error after the probes' timeout
// instead of holding it.
func TestLostIsBoundedByAHungStat(t *testing.T) {
	f := newStagerFixture(t, nil)
	old := stoppedStaging(t, f)
	pod, err := f.kube.CoreV1().Pods(old.Namespace).Get(context.Background(), old.Name, metav1.GetOptions{}) // failed

	if err != nil {
		t.Fatal(err)
	}
	hung := make(chan struct{})
	defer close(hung)
	f.stager.deviceAt = func(string) (uint64, error) { <-hung; return 0, errors.New("released") }
	f.stager.probes.Timeout = time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := f.stager.lost(context.Background(), pod, t.TempDir(), true)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no answer") {
			t.Errorf("lost() = %v, want the device number unanswered", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("lost() is held by a stat that does not return")
	}
}

// On cgroup v2 a stopped block staging is kept, not restaged (its device
// number is not given back while running clients may still open it), and
// its clients are told once, however often the staging is looked at.
func TestBlockStagingKeptOnCgroupV2(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx := context.Background()
	events := record.NewFakeRecorder(10)
	f.stager.recorder = events
	client, err := f.kube.CoreV1().Pods("ns").Create(ctx, newClientPod(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := stoppedStaging(t, f)
	req, err := f.stager.republishRequest(old)
	if err != nil {
		t.Fatal(err)
	}
	req.Block = true
	rec := &recoveryRecord{Replaces: []string{"0:42:/"}, Clients: []types.UID{client.UID}, Since: time.Now(), Device: unix.Mkdev(7, 3)}
	for range 3 {
		f.stager.keepForBlockClients(ctx, old, req, rec)
	}
	close(events.Events)
	var got []string
	for e := range events.Events {
		got = append(got, e)
	}
	if len(got) != 1 || !strings.Contains(got[0], "Warning "+ReasonVolumeNotRecovered) || !strings.Contains(got[0], "delete and recreate the pod") {
		t.Errorf("Events %q, want one Warning %s", got, ReasonVolumeNotRecovered)
	}
	var stagings []corev1.Pod
	for _, p := range f.pods() {
		if p.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
			stagings = append(stagings, p)
		}
	}
	if len(stagings) != 1 || stagings[0].UID != old.UID || stagings[0].DeletionTimestamp != nil {
		t.Errorf("staging pods %v, want the old one only, kept", podNames(stagings))
	}
}

// A recovery replaces, on the node, only where its recorded client pods
// see its volume: the device number it recorded is given to another file
// system once the old mounts are gone, and a repeated replacement took
// another claim's volume for this one (the soak's seed 604644: a reader of
// one claim read another's token).
func TestRecoveryReplacesOnlyWhereItsClientsSeeTheVolume(t *testing.T) {
	const (
		client = "6a2f3c1e-9b4d-4e7a-8c15-3d2e1f0a9b8c"
		other  = "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
		pv     = "pvc-11111111-2222-4333-8444-555555555555"
		pv2    = "pvc-99999999-2222-4333-8444-555555555555"
	)
	rec := &recoveryRecord{Replaces: []string{"0:42:/"}, Clients: []types.UID{client}}
	seen := rec.seenBy(pv)
	for mp, want := range map[string]bool{
		"/var/lib/kubelet/pods/" + client + "/volumes/kubernetes.io~csi/" + pv + "/mount":                   true,
		"/var/lib/kubelet/pods/" + client + "/volume-subpaths/" + pv + "/app/0":                             true,
		"/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/" + pv + "/" + client:             true,
		"/var/lib/kubelet/pods/" + client + "/volumeDevices/kubernetes.io~csi/" + pv:                        true,
		"/var/lib/kubelet/pods/" + other + "/volumes/kubernetes.io~csi/" + pv + "/mount":                    false, // not a recorded client
		"/var/lib/kubelet/pods/" + other + "/volumes/kubernetes.io~csi/" + pv2 + "/mount":                   false, // another pod's volume
		"/var/lib/kubelet/pods/" + client + "/volumes/kubernetes.io~csi/" + pv2 + "/mount":                  false, // the client's other volume
		"/var/lib/kubelet/pods/" + client + "/volumes/kubernetes.io~empty-dir/scratch":                      false,
		"/var/lib/kubelet/plugins/pav.albertofaria.github.io/pods/pav-staging-x/pav/volume":                 false, // the old staging's
		"/var/lib/kubelet/plugins/kubernetes.io/csi/example.pav/54f50aff0c05f509a804604b776c85/globalmount": false,
	} {
		if got := seen(mp); got != want {
			t.Errorf("seenBy(%s)(%s) = %v, want %v", pv, mp, got, want)
		}
	}

	pvJSON := `{"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"` + pv + `"}}`
	staging := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{protocol.AnnotationVolumeSnapshot: pvJSON}}}
	for target, want := range map[string]string{
		"/var/lib/kubelet/pods/" + client + "/volumes/kubernetes.io~csi/" + pv + "/mount":       pv,
		"/var/lib/kubelet/pods/" + client + "/volumes/kubernetes.io~csi/my-inline/mount":        "my-inline", // an inline volume: kubelet names it as the pod does
		"/var/lib/kubelet/plugins/kubernetes.io/csi/example.pav/54f50aff0c05f509a8/globalmount": pv,          // shared staging: the PV's name
	} {
		if got := kubeletVolumeName(staging, &pavcsi.PublishRequest{TargetPath: target}); got != want {
			t.Errorf("kubeletVolumeName(target %s) = %q, want %q", target, got, want)
		}
	}
}
