//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	groupsnapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/albertofaria/pav/test/integration/framework"
)

// What PaV's controller may do with VolumeGroupSnapshotContents, with
// deployment.yaml's RBAC and policies on a real API server: exactly what
// csi-snapshotter's group side writes (the being-created annotation, the
// status with the group's and each volume's handles, recorded once, the
// bound finalizer taken off), and read the groups and their classes.
func TestControllerGroupSnapshotContentScope(t *testing.T) {
	env := framework.New(t) // its own API server: the policies would bind the other tests' controller
	cfg := env.Config
	ctx := context.Background()
	for _, f := range []string{"volumegroupsnapshotcontents", "volumegroupsnapshots", "volumegroupsnapshotclasses"} {
		crd, err := os.ReadFile(filepath.Join("..", "..", "third_party", "external-snapshotter", "crds", "groupsnapshot.storage.k8s.io_"+f+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		env.InstallCRDs(t, crd)
	}
	applyAccessObjects(t, cfg)
	adminSnaps := snapshotclient.NewForConfigOrDie(cfg)
	ctrlUser, ctrlGroups := serviceAccount("controller")
	ctrlCfg := rest.CopyConfig(cfg)
	ctrlCfg.Impersonate = rest.ImpersonationConfig{UserName: ctrlUser, Groups: append(ctrlGroups, "system:authenticated")}
	ctrlSnaps := snapshotclient.NewForConfigOrDie(ctrlCfg)

	const (
		boundFinalizer = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"
		beingCreated   = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"
	)
	content := func(name string, static bool) *groupsnapshotv1.VolumeGroupSnapshotContent {
		c := &groupsnapshotv1.VolumeGroupSnapshotContent{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{boundFinalizer, "other.example.com/keep"},
				Annotations: map[string]string{"note": "admin's"}},
			Spec: groupsnapshotv1.VolumeGroupSnapshotContentSpec{
				Driver:                 "pav-a",
				DeletionPolicy:         snapshotv1.VolumeSnapshotContentRetain,
				VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: "default", Name: "group-" + name},
			},
		}
		if static {
			c.Spec.Source.GroupSnapshotHandles = &groupsnapshotv1.GroupSnapshotHandles{VolumeGroupSnapshotHandle: "static-group", VolumeSnapshotHandles: []string{"s1", "s2"}}
		} else {
			c.Spec.Source.VolumeHandles = []string{"vol-1", "vol-2"}
		}
		got, err := adminSnaps.GroupsnapshotV1().VolumeGroupSnapshotContents().Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	contents := ctrlSnaps.GroupsnapshotV1().VolumeGroupSnapshotContents()
	patchContent := func(name, body string, subresource ...string) error {
		_, err := contents.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresource...)
		return err
	}
	setStatus := func(name, group, members string) error {
		return patchContent(name, `{"status":{"volumeGroupSnapshotHandle":"`+group+`","readyToUse":true,"volumeSnapshotInfoList":`+members+`}}`, "status")
	}
	const members = `[{"volumeHandle":"vol-1","snapshotHandle":"snap-1","readyToUse":true},{"volumeHandle":"vol-2","snapshotHandle":"snap-2","readyToUse":true}]`

	dynamic := content("dynamic", false)
	waitUntilRefused(t, "policy pav-controller-scope",
		func() error {
			_, err := contents.Patch(ctx, dynamic.Name, types.MergePatchType, []byte(`{"spec":{"deletionPolicy":"Delete"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}, "never creates, deletes or changes the spec or labels of a VolumeGroupSnapshotContent")
	_, err := contents.List(ctx, metav1.ListOptions{})
	allowed(t, "controller lists group contents", err)
	_, err = ctrlSnaps.GroupsnapshotV1().VolumeGroupSnapshotClasses().List(ctx, metav1.ListOptions{})
	allowed(t, "controller lists group snapshot classes", err)
	_, err = ctrlSnaps.GroupsnapshotV1().VolumeGroupSnapshots("default").List(ctx, metav1.ListOptions{})
	allowed(t, "controller lists group snapshots", err)
	_, err = contents.Create(ctx, &groupsnapshotv1.VolumeGroupSnapshotContent{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: groupsnapshotv1.VolumeGroupSnapshotContentSpec{Driver: "pav-a", DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			VolumeGroupSnapshotRef: corev1.ObjectReference{Namespace: "default", Name: "g"},
			Source:                 groupsnapshotv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{"v"}}}}, metav1.CreateOptions{})
	denied(t, "controller creates a group content", err, "")
	denied(t, "controller labels a group content", patchContent(dynamic.Name, `{"metadata":{"labels":{"a":"b"}}}`), "spec or labels")
	denied(t, "controller changes another annotation", patchContent(dynamic.Name, `{"metadata":{"annotations":{"note":"mine"}}}`), "only the being-created annotation")
	denied(t, "controller removes another finalizer",
		patchContent(dynamic.Name, `{"metadata":{"finalizers":["`+boundFinalizer+`"]}}`), "only takes the bound finalizer off")
	allowed(t, "controller marks a group being created", patchContent(dynamic.Name, `{"metadata":{"annotations":{"`+beingCreated+`":"yes"}}}`))
	allowed(t, "controller records the group's and its volumes' handles", setStatus(dynamic.Name, "g1", members))
	allowed(t, "controller records the same again", setStatus(dynamic.Name, "g1", members))
	// (the CRD's own rule refuses this first: the handle is immutable once set)
	denied(t, "controller swaps a recorded group handle", setStatus(dynamic.Name, "g2", members), "volumeGroupSnapshotHandle")
	denied(t, "controller changes a volume's recorded snapshot",
		setStatus(dynamic.Name, "g1", `[{"volumeHandle":"vol-1","snapshotHandle":"other","readyToUse":true}]`), "its volumes' snapshots once")
	denied(t, "controller clears a group handle of a content not being deleted",
		patchContent(dynamic.Name, `{"status":{"volumeGroupSnapshotHandle":null}}`, "status"), "clears the handle only when the content is being deleted")
	allowed(t, "controller takes the being-created annotation off", patchContent(dynamic.Name, `{"metadata":{"annotations":{"`+beingCreated+`":null}}}`))

	static := content("static", true)
	denied(t, "controller records another handle than a pre-provisioned group's",
		patchContent(static.Name, `{"status":{"volumeGroupSnapshotHandle":"other","readyToUse":true}}`, "status"), "a pre-provisioned one's handle from its spec")
	allowed(t, "controller records a pre-provisioned group's handle",
		patchContent(static.Name, `{"status":{"volumeGroupSnapshotHandle":"static-group","readyToUse":true}}`, "status"))

	// Deleting the group: the handle is cleared (the members' list stays,
	// as csi-snapshotter leaves it), then the bound finalizer goes.
	if err := adminSnaps.GroupsnapshotV1().VolumeGroupSnapshotContents().Delete(ctx, dynamic.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed(t, "controller clears the group handle of a content being deleted",
		patchContent(dynamic.Name, `{"status":{"volumeGroupSnapshotHandle":null,"readyToUse":null,"creationTime":null}}`, "status"))
	allowed(t, "controller takes the bound finalizer off", patchContent(dynamic.Name, `{"metadata":{"finalizers":["other.example.com/keep"]}}`))
}
