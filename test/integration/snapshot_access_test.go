//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapshotclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/test/integration/framework"
)

// What PaV's controller may write on VolumeSnapshotContents and
// PersistentVolumes, with deployment.yaml's policies on a real API server:
// only what csi-snapshotter would (policy pav-controller-scope), and only for
// the drivers ConfigMap pav/pav-controller-drivers lists (policy
// pav-controller-drivers; "*", the default, is any).
func TestControllerSnapshotContentScope(t *testing.T) {
	env := framework.New(t) // its own API server: the policies would bind the other tests' controller
	cfg := env.Config
	ctx := context.Background()
	crd, err := os.ReadFile(filepath.Join("..", "..", "third_party", "external-snapshotter", "crds", "snapshot.storage.k8s.io_volumesnapshotcontents.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env.InstallCRDs(t, crd)
	applyAccessObjects(t, cfg)
	admin := kubernetes.NewForConfigOrDie(cfg)
	adminSnaps := snapshotclient.NewForConfigOrDie(cfg)
	ctrlUser, ctrlGroups := serviceAccount("controller")
	ctrlCfg := rest.CopyConfig(cfg)
	ctrlCfg.Impersonate = rest.ImpersonationConfig{UserName: ctrlUser, Groups: append(ctrlGroups, "system:authenticated")}
	ctrl, ctrlSnaps := kubernetes.NewForConfigOrDie(ctrlCfg), snapshotclient.NewForConfigOrDie(ctrlCfg)

	const boundFinalizer = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	content := func(name, driver string, static bool) *snapshotv1.VolumeSnapshotContent {
		c := &snapshotv1.VolumeSnapshotContent{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{boundFinalizer, "other.example.com/keep"},
				Annotations: map[string]string{"note": "admin's"}},
			Spec: snapshotv1.VolumeSnapshotContentSpec{
				Driver:            driver,
				DeletionPolicy:    snapshotv1.VolumeSnapshotContentRetain,
				VolumeSnapshotRef: corev1.ObjectReference{Namespace: "default", Name: "snap-" + name},
			},
		}
		if static {
			c.Spec.Source.SnapshotHandle = ptr.To("static-handle")
		} else {
			c.Spec.Source.VolumeHandle = ptr.To("volume-handle")
		}
		got, err := adminSnaps.SnapshotV1().VolumeSnapshotContents().Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	contents := ctrlSnaps.SnapshotV1().VolumeSnapshotContents()
	patchContent := func(name, body string, subresource ...string) error {
		_, err := contents.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, subresource...)
		return err
	}
	// A dry run, to wait for a policy: it changes nothing whichever way it is answered.
	probeContent := func(name, body string) func() error {
		return func() error {
			_, err := contents.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	setHandle := func(name, handle string) error {
		return patchContent(name, `{"status":{"snapshotHandle":"`+handle+`","readyToUse":true}}`, "status")
	}

	dynamic := content("dynamic", "pav-a", false)
	waitUntilRefused(t, "policy pav-controller-scope", probeContent(dynamic.Name, `{"spec":{"deletionPolicy":"Delete"}}`), "never creates, deletes or changes the spec")
	denied(t, "controller rebinds a content to another VolumeSnapshot",
		patchContent(dynamic.Name, `{"spec":{"volumeSnapshotRef":{"name":"mine"}}}`), "never creates, deletes or changes the spec")
	denied(t, "controller labels a content", patchContent(dynamic.Name, `{"metadata":{"labels":{"a":"b"}}}`), "spec or labels")
	denied(t, "controller changes another annotation", patchContent(dynamic.Name, `{"metadata":{"annotations":{"note":"mine"}}}`), "only the being-created annotation")
	denied(t, "controller removes another finalizer",
		patchContent(dynamic.Name, `{"metadata":{"finalizers":["`+boundFinalizer+`"]}}`), "only takes the bound finalizer off")
	allowed(t, "controller marks a snapshot being created",
		patchContent(dynamic.Name, `{"metadata":{"annotations":{"snapshot.storage.kubernetes.io/volumesnapshot-being-created":"yes"}}}`))
	allowed(t, "controller records a snapshot's handle", setHandle(dynamic.Name, "h1"))
	allowed(t, "controller records the same handle again", setHandle(dynamic.Name, "h1"))
	denied(t, "controller swaps a recorded handle", setHandle(dynamic.Name, "h2"), "records a VolumeSnapshotContent's snapshot handle once")
	denied(t, "controller clears a handle of a content not being deleted",
		patchContent(dynamic.Name, `{"status":{"snapshotHandle":null}}`, "status"), "clears it only when the content is being deleted")
	allowed(t, "controller takes the being-created annotation off",
		patchContent(dynamic.Name, `{"metadata":{"annotations":{"snapshot.storage.kubernetes.io/volumesnapshot-being-created":null}}}`))

	static := content("static", "pav-a", true)
	denied(t, "controller records another handle than a pre-provisioned content's", setHandle(static.Name, "other"), "a pre-provisioned one's from its spec")
	allowed(t, "controller records a pre-provisioned content's handle", setHandle(static.Name, "static-handle"))

	// Deleting the snapshot: the handle is cleared, then the bound finalizer goes.
	if err := adminSnaps.SnapshotV1().VolumeSnapshotContents().Delete(ctx, dynamic.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed(t, "controller clears the handle of a content being deleted",
		patchContent(dynamic.Name, `{"status":{"snapshotHandle":null,"readyToUse":null}}`, "status"))
	allowed(t, "controller takes the bound finalizer off",
		patchContent(dynamic.Name, `{"metadata":{"finalizers":["other.example.com/keep"]}}`))

	// The drivers it may act for.
	other := content("other", "ebs.csi.example.com", false)
	drivers, err := admin.CoreV1().ConfigMaps("pav").Get(ctx, "pav-controller-drivers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if drivers.Data["drivers"] != "*" {
		t.Errorf("ConfigMap pav-controller-drivers by default: %v, want drivers: \"*\"", drivers.Data)
	}
	allowed(t, "controller records another driver's handle while any driver is allowed", setHandle(other.Name, "h1"))
	drivers.Data = map[string]string{"drivers": "pav-a,\npav-b"}
	if _, err := admin.CoreV1().ConfigMaps("pav").Update(ctx, drivers, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntilRefused(t, "policy pav-controller-drivers with its new drivers", probeContent(other.Name, `{"metadata":{"annotations":{"snapshot.storage.kubernetes.io/volumesnapshot-being-created":"yes"}}}`),
		`may not act for CSI driver "ebs.csi.example.com": it acts only for the drivers listed in ConfigMap pav/pav-controller-drivers (pav-a pav-b)`)
	allowed(t, "controller marks a listed driver's snapshot being created",
		patchContent(static.Name, `{"metadata":{"annotations":{"snapshot.storage.kubernetes.io/volumesnapshot-being-created":"yes"}}}`))

	pv := func(name, driver string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{protocol.AnnotationClaimSnapshot: "{}"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "h"}},
			},
		}
	}
	_, err = ctrl.CoreV1().PersistentVolumes().Create(ctx, pv("foreign", "ebs.csi.example.com"), metav1.CreateOptions{})
	denied(t, "controller creates a PV of a driver not listed", err, `may not act for CSI driver "ebs.csi.example.com"`)
	_, err = ctrl.CoreV1().PersistentVolumes().Create(ctx, pv("own", "pav-b"), metav1.CreateOptions{})
	allowed(t, "controller creates a PV of a listed driver", err)
}
