package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
)

const (
	restoreSnapshot = "snap"
	restoreContent  = "snapcontent-1"
	restoreHandle   = "snap-handle-1"
)

// restoreObjects is testObjects whose claim (Filesystem, 1Gi) restores
// VolumeSnapshot "snap", ready and bound to a content of the provisioner
// taken from a Filesystem volume, restore size 1Gi.
func restoreObjects() []runtime.Object {
	objs := testObjects()
	pvc := objs[1].(*corev1.PersistentVolumeClaim)
	group := snapshotv1.GroupName
	fs := corev1.PersistentVolumeFilesystem
	pvc.Spec.VolumeMode = &fs
	pvc.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VolumeSnapshot", Name: restoreSnapshot}
	size := resource.MustParse("1Gi")
	snap := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: restoreSnapshot, UID: "snap-uid"},
		Status: &snapshotv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: ptrTo(restoreContent),
			ReadyToUse: ptrTo(true), RestoreSize: &size},
	}
	content := &snapshotv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: restoreContent},
		Spec: snapshotv1.VolumeSnapshotContentSpec{
			Driver: testProvisioner, DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete,
			Source:            snapshotv1.VolumeSnapshotContentSource{VolumeHandle: ptrTo("src-vol")},
			SourceVolumeMode:  &fs,
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: "ns", Name: restoreSnapshot, UID: "snap-uid"},
		},
		Status: &snapshotv1.VolumeSnapshotContentStatus{SnapshotHandle: ptrTo(restoreHandle), ReadyToUse: ptrTo(true),
			RestoreSize: ptrTo(size.Value())},
	}
	return append(objs, snap, content)
}

func allowRestoring(h *harness) {
	h.prov.Spec.VolumeCreation = &v1alpha1.VolumeCreation{Restoring: true}
}

// objectsReader is SnapshotReader over a list of objects.
type objectsReader []runtime.Object

func (r objectsReader) VolumeSnapshot(_ context.Context, namespace, name string) (*snapshotv1.VolumeSnapshot, error) {
	for _, o := range r {
		if s, ok := o.(*snapshotv1.VolumeSnapshot); ok && s.Namespace == namespace && s.Name == name {
			return s, nil
		}
	}
	return nil, apierrors.NewNotFound(snapshotv1.Resource("volumesnapshots"), name)
}

func (r objectsReader) VolumeSnapshotContent(_ context.Context, name string) (*snapshotv1.VolumeSnapshotContent, error) {
	for _, o := range r {
		if c, ok := o.(*snapshotv1.VolumeSnapshotContent); ok && c.Name == name {
			return c, nil
		}
	}
	return nil, apierrors.NewNotFound(snapshotv1.Resource("volumesnapshotcontents"), name)
}

// Restore makes external-provisioner's checks before a claim is restored,
// and on success gives the request the snapshot and its content.
func TestRestore(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	now := metav1.Now()
	type world struct {
		p       *v1alpha1.PavProvisioner
		pvc     *corev1.PersistentVolumeClaim
		snap    *snapshotv1.VolumeSnapshot
		content *snapshotv1.VolumeSnapshotContent
		noAPI   bool
	}
	annotate := func(w *world, value string) {
		w.content.Annotations = map[string]string{annAllowVolumeModeChange: value}
	}
	tests := []struct {
		name   string
		change func(w *world)
		// problem: parts of the message ("" for none); retry: whether it may pass by itself.
		problem []string
		retry   bool
	}{
		{"ready snapshot restores", func(w *world) {}, nil, false},
		{"no data source: nothing to restore", func(w *world) { w.pvc.Spec.DataSource = nil }, nil, false},
		{"another namespace", func(w *world) {
			w.pvc.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptrTo(snapshotv1.GroupName), Kind: "VolumeSnapshot", Name: restoreSnapshot, Namespace: ptrTo("other")}
		}, []string{"other/snap", "claim's own namespace"}, false},
		{"provisioner without restoring", func(w *world) { w.p.Spec.VolumeCreation = nil }, []string{"restoring is not true"}, false},
		{"no snapshot API", func(w *world) { w.noAPI = true }, []string{"without the snapshot API"}, false},
		{"snapshot missing", func(w *world) { w.snap.Name = "other" }, []string{`VolumeSnapshot "snap" to restore`, "not found"}, true},
		{"snapshot being deleted", func(w *world) { w.snap.DeletionTimestamp = &now }, []string{"being deleted"}, true},
		{"snapshot not ready", func(w *world) { w.snap.Status.ReadyToUse = ptrTo(false) }, []string{"not ready to use yet"}, true},
		{"content missing", func(w *world) { w.content.Name = "other" }, []string{`VolumeSnapshotContent "snapcontent-1"`, "not found"}, true},
		{"content bound to another snapshot", func(w *world) { w.content.Spec.VolumeSnapshotRef.UID = "other" }, []string{"not bound to VolumeSnapshot"}, true},
		{"content of another driver", func(w *world) { w.content.Spec.Driver = "other.csi" }, []string{`driver "other.csi"`}, false},
		{"content without a handle", func(w *world) { w.content.Status.SnapshotHandle = nil }, []string{"no snapshot handle yet"}, true},
		{"pre-provisioned handle", func(w *world) {
			w.content.Status.SnapshotHandle = nil
			w.content.Spec.Source = snapshotv1.VolumeSnapshotContentSource{SnapshotHandle: ptrTo(restoreHandle)}
		}, nil, false},
		{"claim smaller than the content's restore size", func(w *world) {
			w.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
			w.snap.Status.RestoreSize = nil
		}, []string{"requests 512Mi (536870912 bytes)", "restore size", "(1073741824 bytes)"}, false},
		{"claim smaller than the snapshot's restore size", func(w *world) {
			w.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("512Mi")
			w.content.Status.RestoreSize = nil
		}, []string{"requests 512Mi", "(1073741824 bytes)"}, false},
		{"restore size unknown (0, pre-provisioned)", func(w *world) {
			w.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("1Mi")
			w.content.Status.RestoreSize, w.snap.Status.RestoreSize = ptrTo(int64(0)), nil
		}, nil, false},
		{"larger claim", func(w *world) { w.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi") }, nil, false},
		{"another volume mode", func(w *world) { w.pvc.Spec.VolumeMode = &block },
			[]string{"volumeMode Block", "volumeMode Filesystem", annAllowVolumeModeChange + `: "true"`, `VolumeSnapshotContent "snapcontent-1"`}, true},
		{"another volume mode, allowed", func(w *world) { w.pvc.Spec.VolumeMode = &block; annotate(w, "true") }, nil, false},
		{"another volume mode, forbidden", func(w *world) { w.pvc.Spec.VolumeMode = &block; annotate(w, "false") },
			[]string{"Block", "Filesystem", "forbids the change", annAllowVolumeModeChange}, true},
		{"another volume mode, not a boolean", func(w *world) { w.pvc.Spec.VolumeMode = &block; annotate(w, "yes please") },
			[]string{"not a boolean", `"yes please"`}, true},
		{"source volume mode not recorded", func(w *world) { w.pvc.Spec.VolumeMode = &block; w.content.Spec.SourceVolumeMode = nil }, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := restoreObjects()
			w := &world{p: provisionerFixture(testProvisioner), pvc: objs[1].(*corev1.PersistentVolumeClaim),
				snap: objs[2].(*snapshotv1.VolumeSnapshot), content: objs[3].(*snapshotv1.VolumeSnapshotContent)}
			w.p.Spec.VolumeCreation = &v1alpha1.VolumeCreation{Restoring: true}
			tc.change(w)
			var read SnapshotReader = objectsReader{w.snap, w.content}
			if w.noAPI {
				read = nil
			}
			req := templating.DynamicRequest{PVC: w.pvc}
			problem := Restore(context.Background(), w.p, read, &req)
			if tc.problem == nil {
				if problem != nil {
					t.Fatalf("refused: %s", problem.Message)
				}
				if snapshotSource(w.pvc) != nil && (req.SourceSnapshot != w.snap || req.SourceContent != w.content) {
					t.Errorf("request without the snapshot and its content: %+v", req)
				}
				return
			}
			if problem == nil {
				t.Fatal("not refused")
			}
			for _, part := range tc.problem {
				if !strings.Contains(problem.Message, part) {
					t.Errorf("message %q lacks %q", problem.Message, part)
				}
			}
			if problem.Retry != tc.retry {
				t.Errorf("retry %v, want %v", problem.Retry, tc.retry)
			}
			if req.SourceSnapshot != nil || req.SourceContent != nil {
				t.Errorf("a refused restore gave the request its source: %+v", req)
			}
		})
	}
}

// snapshotEngine is stubEngine that records the snapshot handle each
// creation was evaluated with.
type snapshotEngine struct {
	stubEngine
	handles *[]string
}

func (e snapshotEngine) Creation(ctx context.Context, p *v1alpha1.PavProvisioner, r templating.DynamicRequest) (*templating.CreationConfig, error) {
	h := ""
	if r.SourceContent != nil {
		h = templating.SnapshotHandle(r.SourceContent)
	}
	*e.handles = append(*e.handles, h)
	return e.stubEngine.Creation(ctx, p, r)
}

// crossModeObjects is restoreObjects whose claim asks for a Block volume.
func crossModeObjects() []runtime.Object {
	objs := restoreObjects()
	block := corev1.PersistentVolumeBlock
	objs[1].(*corev1.PersistentVolumeClaim).Spec.VolumeMode = &block
	return objs
}

// A claim restored into another volume mode than its snapshot's source
// stays Pending, with an Event naming both modes and the annotation that
// allows it, and no pod; once the content has the annotation it is
// provisioned from the snapshot.
func TestRestoreAcrossVolumeModesWaitsForTheAnnotation(t *testing.T) {
	h := newHarness(t, crossModeObjects()...)
	allowRestoring(h)
	var handles []string
	h.engine = snapshotEngine{handles: &handles}
	h.restart()
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_ = h.step()
	}
	pods, _ := h.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	pvs, _ := h.kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if len(pods.Items) != 0 || len(pvs.Items) != 0 || len(handles) != 0 {
		t.Fatalf("a restore across volume modes went ahead:\n%s", h.describe())
	}
	events := strings.Join(drain(h.events), "\n")
	for _, part := range []string{"Warning " + reasonProvisioningFailed, "volumeMode Block", "volumeMode Filesystem", annAllowVolumeModeChange} {
		if !strings.Contains(events, part) {
			t.Errorf("events lack %q:\n%s", part, events)
		}
	}

	content, err := h.snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, restoreContent, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content.Annotations = map[string]string{annAllowVolumeModeChange: "true"}
	if _, err := h.snap.SnapshotV1().VolumeSnapshotContents().Update(ctx, content, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	provisioning.run(t, h, 10)
	if len(handles) == 0 || handles[0] != restoreHandle {
		t.Errorf("creation evaluated with snapshot handles %q, want %q", handles, restoreHandle)
	}
}

// restoring: a claim is provisioned from a snapshot whose content allows
// the change of volume mode.
var restoring = scenario{
	objects: func() []runtime.Object {
		objs := crossModeObjects()
		objs[3].(*snapshotv1.VolumeSnapshotContent).Annotations = map[string]string{annAllowVolumeModeChange: "true"}
		return objs
	},
	setup: allowRestoring,
	step:  (*harness).step,
	done:  (*harness).provisioned,
	check: (*harness).checkVolume,
	once:  protocol.PhaseCreation,
}

func TestRestoreSurvivesAFaultAtEveryWrite(t *testing.T) {
	testEveryFault(t, restoring)
}
