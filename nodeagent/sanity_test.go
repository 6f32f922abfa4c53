package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"

	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/internal/csisanity"
	"github.com/albertofaria/pav/internal/testwait"
	"github.com/albertofaria/pav/protocol"
)

// TestSanityOnStager runs csi-sanity against PaV's node service backed by
// the real Stager: staging and unstaging pods are created in a fake
// clientset and run by a fake kubelet (runPods), volumes by a test-only
// controller service that creates PersistentVolumes as PaV's controller
// would.
func TestSanityOnStager(t *testing.T) {
	f := newStagerFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.runPods(ctx)

	csisanity.Test(t, pavcsi.NewDriver(testDriver, "test", "node1", f.stager), &pvController{f: f})

	staged := 0
	for _, a := range f.kube.Actions() {
		if c, ok := a.(clienttesting.CreateAction); ok && a.GetResource().Resource == "pods" {
			if c.GetObject().(*corev1.Pod).Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
				staged++
			}
		}
	}
	if staged == 0 {
		t.Error("csi-sanity published no volume through staging pods")
	}
	t.Logf("%d staging pods", staged)
}

// runPods plays kubelet for the fixture's pods until ctx ends: a staging
// pod provides a directory as /pav/volume and succeeds, any other pod
// succeeds.
func (f *stagerFixture) runPods(ctx context.Context) {
	w, err := f.kube.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		f.t.Error(err)
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok || pod.Status.Phase != "" || pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Labels[protocol.LabelPhase] == string(protocol.PhaseStaging) {
			dir, err := protocol.PodHostDir(pod, f.root)
			if err == nil {
				err = os.MkdirAll(filepath.Join(dir, protocol.FileVolume), 0o750)
			}
			if err != nil {
				f.t.Error(err)
				continue
			}
		}
		pod = pod.DeepCopy()
		pod.Status.Phase = corev1.PodSucceeded
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}
		if _, err := f.kube.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			f.t.Error(err)
		}
	}
}

// pvController creates and deletes PersistentVolumes of the fixture's
// driver, bound to claims, and waits until the stager's informer sees them.
type pvController struct {
	f *stagerFixture
}

func (c *pvController) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" || len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "name or capabilities missing")
	}
	handle := csisanity.VolumeID(req.GetName())
	size := req.GetCapacityRange().GetRequiredBytes()
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + handle, Namespace: "ns", UID: types.UID("uid-" + handle)}}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + handle, Annotations: map[string]string{protocol.AnnotationProvisionedBy: testDriver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(size, resource.BinarySI)},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: claim.Name, UID: claim.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: testDriver, VolumeHandle: handle}},
		},
	}
	kube := c.f.kube.CoreV1()
	if _, err := kube.PersistentVolumeClaims("ns").Create(ctx, claim, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if old, err := kube.PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err == nil {
		if q := old.Spec.Capacity[corev1.ResourceStorage]; q.Value() != size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with another size", req.GetName())
		}
	} else if _, err := kube.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if err := c.waitForInformer(ctx, handle, true); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: handle, CapacityBytes: size}}, nil
}

func (c *pvController) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" || len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume ID or capabilities missing")
	}
	if _, err := c.f.kube.CoreV1().PersistentVolumes().Get(ctx, "pv-"+req.GetVolumeId(), metav1.GetOptions{}); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

func (c *pvController) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume ID missing")
	}
	handle := req.GetVolumeId()
	if err := c.f.kube.CoreV1().PersistentVolumes().Delete(ctx, "pv-"+handle, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if err := c.waitForInformer(ctx, handle, false); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (c *pvController) waitForInformer(ctx context.Context, handle string, exists bool) error {
	return wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, testwait.Timeout, true, func(context.Context) (bool, error) {
		objs, err := c.f.stager.pvs.ByIndex(pvsByHandle, testDriver+"/"+handle)
		return err == nil && (len(objs) > 0) == exists, err
	})
}
