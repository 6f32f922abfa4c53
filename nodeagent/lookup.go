// What a request is about: its PV and PavProvisioner, from the caches.

package nodeagent

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/nodeagent/inline"
	"github.com/albertofaria/pav/protocol"
)

// findPV finds the PV kubelet means: CSI requests carry the volume handle,
// not the PV name. Several static PVs may share a handle; then the client
// pod's claims decide.
// An inline volume has none: kubelet's publish makes sure it exists and
// gets the one made up for it (inline.Volumes.Publish), a republish that
// does not come from kubelet the one its staging pod recorded.
func (s *Stager) findPV(ctx context.Context, driver, handle string, vctx map[string]string) (*corev1.PersistentVolume, error) {
	if inline.IsRequest(vctx) {
		p, err := s.provisioner(driver)
		if err != nil {
			return nil, err
		}
		return s.inline.Publish(ctx, p, handle, vctx)
	}
	// Templates put the handle into commands: a static PV's is checked here,
	// as the controller checks those it creates.
	if err := protocol.CheckHandle(handle); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "PersistentVolumes with spec.csi.driver %q and this volumeHandle are refused: %v", driver, err)
	}
	objs, err := s.pvs.ByIndex(pvsByHandle, driver+"/"+handle)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}
	switch len(objs) {
	case 0:
		if pv := s.inline.Staged(driver, handle); pv != nil {
			return pv, nil
		}
		return nil, status.Errorf(codes.NotFound, "no PersistentVolume with spec.csi.driver %q and volumeHandle %q", driver, handle)
	case 1:
		return objs[0].(*corev1.PersistentVolume), nil
	}
	ns, name := vctx[pavcsi.ContextPodNamespace], vctx[pavcsi.ContextPodName]
	if name == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "%d PersistentVolumes have volumeHandle %q and the request names no pod", len(objs), handle)
	}
	pod, err := s.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "getting client pod %s/%s: %v", ns, name, err)
	}
	claims := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.PersistentVolumeClaim.ClaimName] = true
		}
	}
	var match *corev1.PersistentVolume
	for _, obj := range objs {
		pv := obj.(*corev1.PersistentVolume)
		if ref := pv.Spec.ClaimRef; ref != nil && ref.Namespace == ns && claims[ref.Name] {
			if match != nil {
				return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s uses several PersistentVolumes with volumeHandle %q", ns, name, handle)
			}
			match = pv
		}
	}
	if match == nil {
		return nil, status.Errorf(codes.NotFound, "none of the PersistentVolumes with volumeHandle %q is bound to a claim of pod %s/%s", handle, ns, name)
	}
	return match, nil
}

func (s *Stager) provisioner(name string) (*v1alpha1.PavProvisioner, error) {
	p, err := s.provisioners.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, status.Errorf(codes.FailedPrecondition, "PavProvisioner %s does not exist", name)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "looking up PavProvisioner %s: %v", name, err)
	}
	return p, nil
}
