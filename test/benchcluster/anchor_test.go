//go:build benchcluster

package benchcluster

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/albertofaria/pav/test/e2e/framework"
)

// The CSI anchor: external-provisioner v5.3.0 and a minimal CSI driver
// (hack/csianchor; image built by `hack/images/build.sh csi-anchor`), run in
// a namespace of their own for the benchmark's duration, the driver's node
// side on the clients' node only. external-provisioner gets PaV's controller's
// client rate limits (200 requests/s, burst 400) instead of its defaults (5,
// burst 10), which throttle even one claim at a time once the burst is spent
// (claim → Bound ~0.45 s instead of ~50 ms): the benchmark compares the
// machinery, not a rate limit.
const (
	anchorImage  = "docker.io/library/pav-bench-csi-anchor:latest"
	anchorDriver = "csi-anchor.pav.bench"
	anchorClass  = "bench-csi-anchor"
	// the clients' node's kubelet root (node 1 of the local cluster: nodes.tsv)
	anchorKubeletDir = "/var/lib/kubelet"
	anchorDataDir    = "/var/lib/pav-bench-anchor"
)

type anchor struct {
	c  kubernetes.Interface
	ns string
	// pods to measure, by role
	pods map[string]string
}

// deployAnchor installs the CSI anchor and waits until it serves.
func (b *bench) deployAnchor() *anchor {
	ctx, c := b.f.Ctx, b.f.Client
	ns, err := framework.CreateNamespace(ctx, c, "bench-csi-anchor-")
	b.must(err)
	a := &anchor{c: c, ns: ns, pods: map[string]string{
		"controller pod: external-provisioner + driver": "controller",
		"node pod: driver + kubelet registration":       "node",
	}}
	b.anchor = a
	_, err = c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "csi-provisioner"}}, metav1.CreateOptions{})
	b.must(err)
	// RBAC does not change what is measured: cluster-admin spares listing
	// external-provisioner's rules.
	_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: anchorClass},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "csi-provisioner", Namespace: ns}},
	}, metav1.CreateOptions{})
	b.must(err)
	_, err = c.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: anchorDriver},
		Spec: storagev1.CSIDriverSpec{
			AttachRequired:       ptr.To(false),
			PodInfoOnMount:       ptr.To(false),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
		},
	}, metav1.CreateOptions{})
	b.must(err)

	container := func(name string, args ...string) corev1.Container {
		return corev1.Container{Name: name, Image: anchorImage, ImagePullPolicy: corev1.PullIfNotPresent, Command: args}
	}
	socket := corev1.VolumeMount{Name: "socket", MountPath: "/csi"}
	controller := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "controller"},
		Spec: corev1.PodSpec{
			ServiceAccountName: "csi-provisioner",
			Containers: []corev1.Container{
				container("csi-provisioner", "/csi-provisioner", "--csi-address=/csi/csi.sock", "--kube-api-qps=200", "--kube-api-burst=400"),
				container("driver", "/csi-anchor-driver", "controller", "--name="+anchorDriver, "--endpoint=/csi/csi.sock"),
			},
			Volumes: []corev1.Volume{{Name: "socket", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	controller.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{socket}
	controller.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{socket}

	bidirectional := corev1.MountPropagationBidirectional
	node := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "node"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{container("driver", "/csi-anchor-driver", "node",
				"--name="+anchorDriver, "--node-id="+b.node, "--kubelet-dir="+anchorKubeletDir, "--data-dir="+anchorDataDir)},
			Volumes: []corev1.Volume{
				{Name: "kubelet", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: anchorKubeletDir}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: anchorDataDir, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
			},
		},
	}
	node.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	node.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{
		{Name: "kubelet", MountPath: anchorKubeletDir, MountPropagation: &bidirectional},
		{Name: "data", MountPath: anchorDataDir},
	}
	for _, pod := range []*corev1.Pod{controller, node} {
		framework.PinToNode(pod, b.node)
		_, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		b.must(err)
		_, err = framework.WaitForPod(ctx, c, ns, pod.Name, stepTimeout, framework.PodRunningReady)
		b.must(err)
	}
	b.waitRegistered(anchorDriver)
	b.createClass(anchorClass, anchorDriver)
	// external-provisioner has just started: one claim first, not measured
	b.must(b.createClaim(c, "anchor-warmup", anchorClass))
	b.wait(claimBound("anchor-warmup"))
	b.must(b.deleteClaim(c, "anchor-warmup"))
	b.wait(pvDeleted("anchor-warmup"))
	return a
}

// remove uninstalls the anchor (its StorageClass goes with the bench's).
func (a *anchor) remove(ctx context.Context, t *testing.T) {
	if err := framework.DeleteNamespace(ctx, a.c, a.ns, true); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	for _, del := range []func() error{
		func() error {
			return a.c.RbacV1().ClusterRoleBindings().Delete(ctx, anchorClass, metav1.DeleteOptions{})
		},
		func() error { return a.c.StorageV1().CSIDrivers().Delete(ctx, anchorDriver, metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	}
	// the volumes' directories, on the clients' node (this machine's files)
	if err := os.RemoveAll(anchorDataDir); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}
