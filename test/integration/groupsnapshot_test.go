//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"testing"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds"
	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/integration/framework"
)

// A VolumeGroupSnapshotContent of two volumes of a PavProvisioner, as the
// snapshot-controller creates it, against a real API server with the group
// snapshot CRDs: PaV runs the group creation pod and records the group's
// handle and each volume's snapshot in the content's status (what the
// snapshot-controller makes the member VolumeSnapshots from); marked for
// deletion, the group deletion pod runs and the content goes.
func TestGroupSnapshotTakenAndDeleted(t *testing.T) {
	fw := framework.New(t) // the group snapshot CRDs on an API server of its own
	fw.InstallCRDs(t, crds.CustomResourceDefinition)
	for _, f := range []string{"groupsnapshot.storage.k8s.io_volumegroupsnapshotcontents", "groupsnapshot.storage.k8s.io_volumegroupsnapshots",
		"groupsnapshot.storage.k8s.io_volumegroupsnapshotclasses", "snapshot.storage.k8s.io_volumesnapshotcontents"} {
		crd, err := os.ReadFile(filepath.Join("..", "..", "third_party", "external-snapshotter", "crds", f+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		fw.InstallCRDs(t, crd)
	}
	e := newEnvOn(t, fw.Config)
	e.snapshots = e.client
	const driver = "group-prov"
	e.provisioner(driver, func(s *v1alpha1.PavProvisionerSpec) {
		s.GroupSnapshotCreation = &v1alpha1.GroupSnapshotCreation{PodTemplate: value(podTemplate(e.ns))}
		s.GroupSnapshotDeletion = &v1alpha1.GroupSnapshotDeletion{PodTemplate: value(podTemplate(e.ns))}
	})
	for _, h := range []string{"vol-a", "vol-b"} {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + h},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: h}},
			},
		}
		if _, err := e.kube.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	groups := e.client.GroupsnapshotV1()
	if _, err := groups.VolumeGroupSnapshotClasses().Create(e.ctx, &groupsnapshotv1.VolumeGroupSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "group-class"}, Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "group-class"
	content, err := groups.VolumeGroupSnapshotContents().Create(e.ctx, &groupsnapshotv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "groupcontent", Finalizers: []string{"groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"}},
		Spec: groupsnapshotv1.VolumeGroupSnapshotContentSpec{
			Driver: driver, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete, VolumeGroupSnapshotClassName: &class,
			Source:                 groupsnapshotv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"vol-a", "vol-b"}},
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: e.ns, Name: "group", UID: "group-uid"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.startController()

	// groupPod waits for the content's pod of a phase.
	groupPod := func(phase protocol.Phase) *corev1.Pod {
		t.Helper()
		var found *corev1.Pod
		e.waitFor("the "+string(phase)+" pod", func() (bool, error) {
			pods, err := e.kube.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{LabelSelector: protocol.LabelPhase + "=" + string(phase) + "," +
				protocol.LabelSnapshotContentUID + "=" + string(content.UID)})
			if err != nil || len(pods.Items) == 0 {
				return false, err
			}
			found = &pods.Items[0]
			return true, nil
		})
		return found
	}
	e.finishPod(groupPod(protocol.PhaseGroupSnapshotCreation), 0, "", map[string]string{
		protocol.AnnotationResultSnapshotHandle:  "group-1",
		protocol.AnnotationResultSnapshotHandles: "vol-b snap-b 1Gi\nvol-a snap-a",
	})
	var got *groupsnapshotv1.VolumeGroupSnapshotContent
	e.waitFor("the group content ready", func() (bool, error) {
		got, err = groups.VolumeGroupSnapshotContents().Get(e.ctx, content.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, creating := got.Annotations["groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"]
		return got.Status != nil && got.Status.ReadyToUse != nil && *got.Status.ReadyToUse && !creating, nil
	})
	st := got.Status
	if st.VolumeGroupSnapshotHandle == nil || *st.VolumeGroupSnapshotHandle != "group-1" || st.CreationTime == nil || len(st.VolumeSnapshotInfoList) != 2 {
		t.Fatalf("status %+v", st)
	}
	for i, want := range []groupsnapshotv1.VolumeSnapshotInfo{{VolumeHandle: "vol-a", SnapshotHandle: "snap-a"}, {VolumeHandle: "vol-b", SnapshotHandle: "snap-b"}} {
		info := st.VolumeSnapshotInfoList[i]
		if info.VolumeHandle != want.VolumeHandle || info.SnapshotHandle != want.SnapshotHandle || info.ReadyToUse == nil || !*info.ReadyToUse {
			t.Errorf("member %d: %+v, want %s %s ready", i, info, want.VolumeHandle, want.SnapshotHandle)
		}
	}
	if rs := st.VolumeSnapshotInfoList[1].RestoreSize; rs == nil || *rs != 1<<30 {
		t.Errorf("vol-b's restore size %v, want 1Gi", rs)
	}
	e.waitEvent(content.Name, "GroupSnapshotCreated", "group-1")

	// The snapshot-controller marks the content for deletion.
	got.Annotations = map[string]string{"groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted": "yes"}
	if _, err := groups.VolumeGroupSnapshotContents().Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := groups.VolumeGroupSnapshotContents().Delete(e.ctx, content.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.finishPod(groupPod(protocol.PhaseGroupSnapshotDeletion), 0, "", nil)
	e.waitFor("the group content to go", func() (bool, error) {
		_, err := groups.VolumeGroupSnapshotContents().Get(e.ctx, content.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
