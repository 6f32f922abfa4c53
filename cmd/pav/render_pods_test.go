package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/controller"
	pavfake "github.com/albertofaria/pav/crds/generated/clientset/versioned/fake"
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
	dir := t.TempDir()
	write := func(name string, obj interface{}) string {
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
	provFile := filepath.Join(dir, "provisioner.yaml")
	if err := os.WriteFile(provFile, []byte(comparedProvisioner), 0o600); err != nil {
		t.Fatal(err)
	}
	prov, err := loadProvisioner(provFile)
	if err != nil {
		t.Fatal(err)
	}
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
	kube := fake.NewClientset(class, pvc)
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
		out, stderr, err := run(t, newRenderCmd, "-f", provFile, "--phase", string(phase), "--pods",
			"--pvc", write("pvc.yaml", seenClaim), "--sc", write("sc.yaml", seenClass), "--selected-node", "node-1")
		if err != nil {
			t.Fatalf("render: %v\n%s", err, stderr)
		}
		rendered := &corev1.Pod{}
		if err := yaml.UnmarshalStrict([]byte(out), rendered); err != nil {
			t.Fatalf("render printed no pod: %v\n%s", err, out)
		}
		got, want := withoutHostDirSuffix(rendered), withoutHostDirSuffix(created)
		// What the API server adds to a pod, and the fake leaves out.
		want.TypeMeta = got.TypeMeta
		want.ResourceVersion, want.UID, want.ManagedFields, want.CreationTimestamp = "", "", nil, metav1.Time{}
		if !equality.Semantic.DeepEqual(got, want) {
			g, _ := yaml.Marshal(got)
			w, _ := yaml.Marshal(want)
			t.Errorf("pav render --pods --phase %s:\n%s\nPaV created:\n%s", phase, g, w)
		}
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

// withoutHostDirSuffix is pod with its /pav host directory cut to the pod's
// name: the suffix is random, so that each incarnation starts empty.
func withoutHostDirSuffix(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	for i, v := range pod.Spec.Volumes {
		if v.Name == protocol.PavVolumeName && v.HostPath != nil {
			pod.Spec.Volumes[i].HostPath.Path = filepath.Join(filepath.Dir(v.HostPath.Path), pod.Name)
		}
	}
	return pod
}
