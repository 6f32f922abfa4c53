package templating

import (
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/albertofaria/pav/crds/v1alpha1"
)

// provisioner decodes a PavProvisioner from YAML; spec is indented by two.
func provisioner(t testing.TB, doc string) *v1alpha1.PavProvisioner {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("bad test YAML: %v\n%s", err, doc)
	}
	p := &v1alpha1.PavProvisioner{}
	if err := json.Unmarshal(j, p); err != nil {
		t.Fatalf("bad test provisioner: %v", err)
	}
	return p
}

// minimal is a valid provisioner; tests append sections to it.
const minimal = minimalNoCreation + `  volumeCreation:
    capacity: 1Gi
`

// minimalNoCreation is minimal without its volumeCreation section.
const minimalNoCreation = `
apiVersion: pav.albertofaria.github.io/v1alpha1
kind: PavProvisioner
metadata:
  name: test
spec:
  provisioningModes: [Dynamic, Static]
  volumeStaging:
    podTemplate:
      spec:
        containers:
          - name: stage
            image: busybox
`

// withSection returns minimal plus YAML that is added under spec.
// A section that brings its own volumeCreation replaces minimal's.
func withSection(section string) string {
	if strings.Contains(section, "volumeCreation:") {
		return minimalNoCreation + indent(section, "  ")
	}
	return minimal + indent(section, "  ")
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func errorStrings(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func testPVC() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "ns", UID: "1111-2222"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr("cls"),
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			},
		},
	}
}

func testClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "cls"},
		Provisioner: "test",
		Parameters:  map[string]string{"path": "/data", "size": "5"},
	}
}

func testPV() *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany},
			VolumeMode:  ptr(corev1.PersistentVolumeBlock),
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "test", VolumeHandle: "h-1", VolumeAttributes: map[string]string{"a": "b"},
			}},
		},
	}
}

func testNode() *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"zone": "z"}}}
}
