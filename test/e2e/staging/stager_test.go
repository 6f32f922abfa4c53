//go:build e2e

package staging

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	mount "k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/nodeagent"
	"github.com/albertofaria/pav/nodeagent/mounts"
	"github.com/albertofaria/pav/protocol"
	"github.com/albertofaria/pav/templating"
	"github.com/albertofaria/pav/test/e2e/framework"
)

// literalEngine stands in for template evaluation: fixed pod templates.
type literalEngine struct {
	staging, unstaging *corev1.PodTemplateSpec
}

func (e *literalEngine) CheckStatic(context.Context, *v1alpha1.PavProvisioner, *corev1.PersistentVolume) error {
	return nil
}
func (e *literalEngine) Staging(context.Context, *v1alpha1.PavProvisioner, templating.StagingRequest) (*corev1.PodTemplateSpec, error) {
	return e.staging, nil
}
func (e *literalEngine) Unstaging(context.Context, *v1alpha1.PavProvisioner, templating.StagingRequest) (*corev1.PodTemplateSpec, error) {
	return e.unstaging, nil
}
func (e *literalEngine) InlineValidation(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*templating.ValidationConfig, error) {
	return &templating.ValidationConfig{VolumeModes: []corev1.PersistentVolumeMode{corev1.PersistentVolumeFilesystem}}, nil
}
func (e *literalEngine) Creation(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*templating.CreationConfig, error) {
	return &templating.CreationConfig{}, nil
}
func (e *literalEngine) Deletion(context.Context, *v1alpha1.PavProvisioner, templating.DynamicRequest) (*corev1.PodTemplateSpec, error) {
	return nil, nil
}
func (e *literalEngine) Forget(*v1alpha1.PavProvisioner) {}

func shPod(ns, script string, privileged bool) *corev1.PodTemplateSpec {
	grace := int64(5)
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "c", Image: framework.TestImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/bin/sh", "-c", script},
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
			}},
		},
	}
}

// TestStagerOnRealKubelet drives the node plugin's Stager directly (as
// NodePublishVolume/NodeUnpublishVolume would) against the real cluster, with
// literal pod templates instead of Jinja: real staging and unstaging pods,
// real Bidirectional mounts, real bind mounts on this host.
func TestStagerOnRealKubelet(t *testing.T) {
	f := framework.New(t)
	ctx := f.Ctx
	node := ""
	nodes, err := f.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	must(t, err)
	node = nodes.Items[0].Name
	driver := "e2e-stager-" + f.Namespace[len(f.Namespace)-5:]
	before := podDirs(t)

	// A bound PV/PVC pair (no provisioner involved).
	pvName := f.Namespace + "-pv"
	fs := corev1.PersistentVolumeFilesystem
	empty := ""
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": driver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode:  &fs,
			ClaimRef:    &corev1.ObjectReference{Namespace: f.Namespace, Name: "c"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: "h1"}},
		},
	}
	_, err = f.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		_ = f.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	_, err = f.Client.CoreV1().PersistentVolumeClaims(f.Namespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &empty, VolumeName: pvName, VolumeMode: &fs,
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}}},
	}, metav1.CreateOptions{})
	must(t, err)

	marker := filepath.Join(hostRoot, f.Namespace)
	must(t, os.MkdirAll(marker, 0o755))
	defer os.RemoveAll(marker)
	engine := &literalEngine{
		// Long-running: a tmpfs inside the volume, a nested one below it, then /pav/ready.
		staging: shPod(f.Namespace, `mkdir -p /pav/volume && mount -t tmpfs -o size=1m tmpfs /pav/volume &&
mkdir /pav/volume/sub && mount -t tmpfs -o size=1m tmpfs /pav/volume/sub &&
echo top > /pav/volume/top && echo nested > /pav/volume/sub/f && touch /pav/ready &&
trap 'exit 0' TERM && sleep 3600 & wait`, true),
		unstaging: shPod(f.Namespace, `echo unstaged > /pav/handle`, false),
	}

	kube, err := kubeclient.NewForConfig(f.Config)
	must(t, err)
	pods := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0,
		kubeclient.Selector{Label: protocol.LabelPhase, Field: "spec.nodeName=" + node})
	must(t, pods.AddIndexers(nodeagent.PodIndexers()))
	pvs := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, 0, kubeclient.Selector{})
	must(t, pvs.AddIndexers(nodeagent.PVIndexers()))
	provs := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1alpha1.PavProvisioner{}, 0, cache.Indexers{})
	must(t, provs.GetIndexer().Add(&v1alpha1.PavProvisioner{ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: v1alpha1.PavProvisionerSpec{ProvisioningModes: []v1alpha1.ProvisioningMode{v1alpha1.Dynamic}}}))
	m := mounts.HostMounter{Interface: mount.New("")}
	stager := nodeagent.NewStager(nodeagent.StagerConfig{
		Kube: kube, Engine: engine, NodeName: node, PodDirRoot: protocol.PodDirRoot(protocol.DefaultKubeletDir), Mounter: m,
		Pods: pods, PVs: pvs, Provisioners: provs,
	})
	kubeclient.Run(ctx, pods, pvs)
	cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, pvs.HasSynced)
	if !cache.WaitForCacheSync(ctx.Done(), func() bool { _, ok, _ := pvs.GetIndexer().GetByKey(pvName); return ok }) {
		t.Fatal("PV never in cache")
	}

	target := filepath.Join(t.TempDir(), "pod", "mount")
	req := &pavcsi.PublishRequest{VolumeID: "h1", TargetPath: target, ReadOnly: true}
	start := time.Now()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = stager.Publish(pctx, driver, req)
	cancel()
	must(t, err)
	t.Logf("Publish of a long-running staging pod (tmpfs + /pav/ready) took %v", time.Since(start))
	for file, want := range map[string]string{"top": "top\n", "sub/f": "nested\n"} {
		b, err := os.ReadFile(filepath.Join(target, file))
		if err != nil || string(b) != want {
			t.Errorf("reading %s through the target: %q, %v", file, b, err)
		}
	}
	for _, p := range []string{target, filepath.Join(target, "sub")} {
		if err := os.WriteFile(filepath.Join(p, "x"), nil, 0o644); err == nil {
			t.Errorf("could write into %s of a read-only volume", p)
		}
	}
	// Idempotent.
	must(t, stager.Publish(ctx, driver, req))

	start = time.Now()
	must(t, stager.Unpublish(ctx, driver, "h1", target))
	t.Logf("Unpublish (stop the staging pod, run the unstaging pod, clean up) took %v", time.Since(start))
	if mps := mountsUnder(t, filepath.Dir(target)); len(mps) > 0 {
		t.Errorf("mounts left under the target: %v", mps)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target left: %v", err)
	}
	left, err := f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(left.Items) != 0 {
		t.Errorf("%d pods left", len(left.Items))
	}
	for d := range podDirs(t) {
		if !before[d] && strings.Contains(d, "staging") {
			t.Errorf("/pav directory left: %s", d)
		}
	}
	if mps := mountsUnder(t, protocol.PodDirRoot(protocol.DefaultKubeletDir)); len(mps) > 0 {
		t.Errorf("mounts left under %s: %v", protocol.PodDirRoot(protocol.DefaultKubeletDir), mps)
	}
	must(t, stager.Unpublish(ctx, driver, "h1", target))

	// A failing staging pod: its message comes back, the unstaging pod runs.
	engine.staging = shPod(f.Namespace, `echo "no route to the storage server" > /pav/error; exit 2`, false)
	engine.unstaging = shPod(f.Namespace, `touch /marker/unstaged`, false)
	engine.unstaging.Spec.Volumes = []corev1.Volume{{Name: "marker", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: marker}}}}
	engine.unstaging.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "marker", MountPath: "/marker"}}
	req = &pavcsi.PublishRequest{VolumeID: "h1", TargetPath: target + "2"}
	err = stager.Publish(ctx, driver, req)
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "no route to the storage server") {
		t.Fatalf("Publish with a failing staging pod: %v", err)
	}
	t.Logf("failure reported as: %v", err)
	if _, err := os.Stat(filepath.Join(marker, "unstaged")); err != nil {
		t.Errorf("unstaging pod did not run: %v", err)
	}
	left, err = f.Client.CoreV1().Pods(f.Namespace).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(left.Items) != 0 {
		t.Errorf("%d pods left after the failure", len(left.Items))
	}
}
