package authoring

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/mount-utils"

	"github.com/albertofaria/pav/crds/v1alpha1"
	pavcsi "github.com/albertofaria/pav/csi"
	"github.com/albertofaria/pav/nodeagent"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/controller"
	pavfake "github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"
	"github.com/albertofaria/pav/kubeclient"
	"github.com/albertofaria/pav/kubeclient/generated/clientset/fake"
	"github.com/albertofaria/pav/protocol"
)

// A provisioner whose pods depend on the claim, the class and the selected
// node, so that a render using other objects than PaV's would show.
const comparedProvisioner = `
apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: compared
spec:
  provisioningModes: [Dynamic]
  volumeValidation:
    podTemplate:
      metadata:
        namespace: "{{ pvc.metadata.namespace }}"
        labels: {app: validate}
      spec:
        containers:
          - name: validate
            image: img
            args: ["{{ requestedMinCapacity }}", "{{ params.k }}", "{{ selectedNodeName }}"]
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
    nodeAffinity:
      required:
        nodeSelectorTerms:
          - matchFields: [{key: metadata.name, operator: In, values: ["{{ selectedNodeName }}"]}]
    podTemplate:
      metadata:
        namespace: "{{ pvc.metadata.namespace }}"
        annotations: {made-for: "{{ pvc.metadata.name }}"}
      spec:
        containers:
          - name: create
            image: img
            securityContext: {privileged: true}
            args: ["{{ defaultHandle }}", "{{ sc.metadata.name }}"]
  volumeStaging:
    podTemplate:
      spec:
        containers: [{name: stage, image: img}]
`

// TestRenderPodsArePaVsPods runs the controller on a fake cluster and checks
// that `pav render --pods` prints the validation and creation pods it creates
// for the same objects (but for the random suffix of the /pav host directory).
func TestRenderPodsArePaVsPods(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write, provFile, prov := renderFiles(t)
	prov.UID = "prov-uid"

	className := "compared-class"
	class := &storagev1.StorageClass{
		TypeMeta:    metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:  metav1.ObjectMeta{Name: className, UID: "class-uid"},
		Provisioner: prov.Name, Parameters: map[string]string{"k": "v"},
	}
	fs := corev1.PersistentVolumeFilesystem
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "claim-uid", Annotations: map[string]string{
			"volume.kubernetes.io/storage-provisioner": prov.Name, // handed over by the PV controller
			"volume.kubernetes.io/selected-node":       "node-1",
		}},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &className,
			VolumeMode:       &fs,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	kube := fake.NewSimpleClientset(class, pvc)
	ctrl, err := controller.New(controller.Config{Kube: kube, Pav: pavfake.NewSimpleClientset(prov), Engine: controller.NewTemplatingEngine(kube)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ctrl.Run(ctx) }()

	// waitPod waits for PaV's pod of a phase.
	waitPod := func(phase protocol.Phase) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p, err := kube.CoreV1().Pods("ns").Get(ctx, protocol.PodName(phase, string(pvc.UID)), metav1.GetOptions{})
			pod = p
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("PaV created no %s pod: %v", phase, err)
		}
		return pod
	}
	// compare renders the phase for the objects PaV saw and compares.
	compare := func(phase protocol.Phase, created *corev1.Pod) {
		t.Helper()
		seenClaim, err := kube.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "data", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seenClass, err := kube.StorageV1().StorageClasses().Get(ctx, className, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkRendered(t, created, "-f", provFile, "--phase", string(phase),
			"--pvc", write("pvc.yaml", seenClaim), "--sc", write("sc.yaml", seenClass), "--selected-node", "node-1")
	}

	validation := waitPod(protocol.PhaseValidation)
	compare(protocol.PhaseValidation, validation)

	// Play kubelet and the node plugin: the validation pod succeeded.
	validation.Status.Phase = corev1.PodSucceeded
	validation.Annotations[protocol.AnnotationResultsCollected] = "true"
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, validation, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	compare(protocol.PhaseCreation, waitPod(protocol.PhaseCreation))
}

// renderFiles writes comparedProvisioner into a temporary directory and
// returns its path and the provisioner, and a function that writes more
// objects there for `pav render`.
func renderFiles(t *testing.T) (write func(name string, obj interface{}) string, provFile string, prov *v1alpha1.PavProvisioner) {
	t.Helper()
	dir := t.TempDir()
	write = func(name string, obj interface{}) string {
		t.Helper()
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	provFile = filepath.Join(dir, "provisioner.yaml")
	if err := os.WriteFile(provFile, []byte(comparedProvisioner), 0o600); err != nil {
		t.Fatal(err)
	}
	prov, _, err := loadProvisioner(provFile)
	if err != nil {
		t.Fatal(err)
	}
	return write, provFile, prov
}

// TestRenderStagingPodIsPaVs runs the node plugin's stager on a fake cluster
// and checks that `pav render --pods --phase staging` prints the staging pod
// it creates for the same objects and target path.
func TestRenderStagingPodIsPaVs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write, provFile, prov := renderFiles(t)
	fs := corev1.PersistentVolumeFilesystem
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-claim-uid", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			VolumeMode: &fs}, // as the API server defaults it
	}
	pv := &corev1.PersistentVolume{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolume"},
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-claim-uid", UID: "pv-uid", Annotations: map[string]string{
			protocol.AnnotationProvisionedBy: prov.Name,
		}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "claim-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: prov.Name, VolumeHandle: "vol-1"}},
		},
	}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	kube := fake.NewSimpleClientset(pvc, pv, node)
	pods := kubeclient.NewInformer(kube, kube.CoreV1().Pods(metav1.NamespaceAll), &corev1.Pod{}, 0, kubeclient.Selector{})
	pvs := kubeclient.NewInformer(kube, kube.CoreV1().PersistentVolumes(), &corev1.PersistentVolume{}, 0, kubeclient.Selector{})
	if err := pods.AddIndexers(nodeagent.PodIndexers()); err != nil {
		t.Fatal(err)
	}
	if err := pvs.AddIndexers(nodeagent.PVIndexers()); err != nil {
		t.Fatal(err)
	}
	pav := pavfake.NewSimpleClientset(prov)
	provs := kubeclient.NewInformer(pav, pav.PavV1alpha1().PavProvisioners(), &v1alpha1.PavProvisioner{}, 0, kubeclient.Selector{})
	stager := nodeagent.NewStager(nodeagent.StagerConfig{
		Kube: kube, Engine: nodeagent.NewTemplatingEngine(kube), NodeName: node.Name, PodDirRoot: t.TempDir(),
		Mounter: mount.NewFakeMounter(nil), Pods: pods, PVs: pvs, Provisioners: provs,
	})
	kubeclient.Run(ctx, pods, pvs, provs)
	cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, pvs.HasSynced, provs.HasSynced)

	// kubelet publishes; no kubelet runs the staging pod, so publishing
	// itself times out: the pod it created is what counts.
	target := "/var/lib/kubelet/pods/client-uid/volumes/kubernetes.io~csi/pvc-claim-uid/mount"
	publishCtx, stop := context.WithTimeout(ctx, 2*time.Second)
	defer stop()
	go func() {
		_ = stager.Publish(publishCtx, prov.Name, &pavcsi.PublishRequest{VolumeID: "vol-1", TargetPath: target, ReadOnly: true})
	}()
	name := protocol.PodName(protocol.PhaseStaging, protocol.StagingID("vol-1", target))
	var created *corev1.Pod
	if err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		created = p
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the node plugin created no staging pod %s: %v", name, err)
	}

	checkRendered(t, created, "-f", provFile, "--phase", "staging", "--read-only",
		"--pvc", write("pvc.yaml", pvc), "--pv", write("pv.yaml", pv), "--node", write("node.yaml", node), "--target-path", target)
}

// checkRendered runs `pav render --pods` with args and compares the pod it
// prints with the one PaV created, but for the /pav host directory (the
// node plugin's root and a random suffix) and what the API server adds.
func checkRendered(t *testing.T, created *corev1.Pod, args ...string) {
	t.Helper()
	out, stderr, err := run(t, newRenderCmd, append(args, "--pods")...)
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	rendered := &corev1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(out), rendered); err != nil {
		t.Fatalf("render printed no pod: %v\n%s", err, out)
	}
	got, want := withoutHostDir(rendered), withoutHostDir(created)
	want.TypeMeta = got.TypeMeta
	want.ResourceVersion, want.UID, want.ManagedFields, want.CreationTimestamp = "", "", nil, metav1.Time{}
	if !equality.Semantic.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("pav render --pods %s:\n%s\nPaV created:\n%s", strings.Join(args, " "), g, w)
	}
}

// withoutHostDir is pod with its /pav host directory cut to the pod's name:
// the node plugin's root and the directory's suffix vary.
func withoutHostDir(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	for i, v := range pod.Spec.Volumes {
		if v.Name == protocol.PavVolumeName && v.HostPath != nil {
			pod.Spec.Volumes[i].HostPath.Path = pod.Name
		}
	}
	return pod
}

// A provisioner that measures capacity per node with a pod that depends on
// the class, the segment and the node.
const capacityProvisioner = `
apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: measured
spec:
  provisioningModes: [Dynamic]
  topologyKeys: [kubernetes.io/hostname]
  storageCapacity:
    podTemplate:
      spec:
        containers:
          - name: df
            image: img
            args: ["{{ params.path }}", "{{ sc.metadata.name }}", "{{ topology['kubernetes.io/hostname'] }}", "{{ nodeName }}"]
  volumeCreation:
    capacity: "{{ requestedMinCapacity }}"
  volumeStaging:
    podTemplate:
      spec:
        containers: [{name: stage, image: img}]
`

// TestRenderCapacityPodIsPaVs runs the controller on a fake cluster and
// checks that `pav render --pods --phase capacity` prints the capacity pod
// it creates for the same class and node.
func TestRenderCapacityPodIsPaVs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write, _, _ := renderFiles(t)
	provFile := filepath.Join(filepath.Dir(write("x.yaml", nil)), "measured.yaml")
	if err := os.WriteFile(provFile, []byte(capacityProvisioner), 0o600); err != nil {
		t.Fatal(err)
	}
	prov, _, err := loadProvisioner(provFile)
	if err != nil {
		t.Fatal(err)
	}
	prov.UID = "prov-uid"
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	class := &storagev1.StorageClass{
		TypeMeta:    metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta:  metav1.ObjectMeta{Name: "measured-class", UID: "class-uid"},
		Provisioner: prov.Name, Parameters: map[string]string{"path": "/srv/volumes"},
		VolumeBindingMode: &wffc,
	}
	node := &corev1.Node{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{corev1.LabelHostname: "node-1"}},
	}
	kube := fake.NewSimpleClientset(class, node)
	// The fake API server sets no creation time, so the controller deletes
	// the pod at once as overdue: record it as created.
	createdPods := make(chan *corev1.Pod, 10)
	kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		createdPods <- a.(k8stesting.CreateAction).GetObject().(*corev1.Pod).DeepCopy()
		return false, nil, nil
	})
	ctrl, err := controller.New(controller.Config{Kube: kube, Pav: pavfake.NewSimpleClientset(prov), Engine: controller.NewTemplatingEngine(kube)})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = ctrl.Run(ctx) }()

	var created *corev1.Pod
	select {
	case created = <-createdPods:
	case <-ctx.Done():
		t.Fatal("PaV created no capacity pod")
	}
	checkRendered(t, created, "-f", provFile, "--phase", "capacity", "--sc", write("sc.yaml", class), "--node", write("node.yaml", node))
}
