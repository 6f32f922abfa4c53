package protocol

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseVolumeAttributes(t *testing.T) {
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Parameters: map[string]string{"endpoint": "http://s3", "csi.storage.k8s.io/fstype": "ext4"}}
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i <= MaxVolumeAttributes; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteString("}")
	tooMany := b.String()
	longValue := `{"k":"` + strings.Repeat("x", MaxVolumeAttributeValueBytes+1) + `"}`
	maxValue := `{"k":"` + strings.Repeat("x", MaxVolumeAttributeValueBytes) + `"}`
	tooLong := `{"a":"` + strings.Repeat("x", MaxVolumeAttributeValueBytes) + `","b":"` + strings.Repeat("x", MaxVolumeAttributeValueBytes) +
		`","c":"` + strings.Repeat("x", MaxVolumeAttributeValueBytes) + `","d":"` + strings.Repeat("x", MaxVolumeAttributeValueBytes) + `"}`

	for _, c := range []struct {
		name, raw string
		want      map[string]string
		wantErr   string
	}{
		{"none", `{}`, map[string]string{}, ""},
		{"strings", " {\"bucketEndpoint\": \"http://10.0.0.1:7070\", \"example.com/region\": \"eu\"}\n",
			map[string]string{"bucketEndpoint": "http://10.0.0.1:7070", "example.com/region": "eu"}, ""},
		{"longest value", maxValue, map[string]string{"k": strings.Repeat("x", MaxVolumeAttributeValueBytes)}, ""},
		{"empty", "", nil, "is empty or could not be read"},
		{"too long", tooLong, nil, fmt.Sprintf("longer than %d bytes", MaxVolumeAttributesBytes)},
		{"not JSON", `endpoint=x`, nil, "not a JSON object of strings"},
		{"array", `["a"]`, nil, "not a JSON object of strings"},
		{"null", `null`, nil, "not a JSON object of strings"},
		{"number value", `{"a":"x","port":7070}`, nil, `the value of key "port" is not a string (a JSON number)`},
		{"object value", `{"o":{"a":"b"}}`, nil, `the value of key "o" is not a string (a JSON object)`},
		{"null value", `{"n":null}`, nil, `the value of key "n" is not a string (a JSON null)`},
		{"too many keys", tooMany, nil, fmt.Sprintf("has %d keys; at most %d", MaxVolumeAttributes+1, MaxVolumeAttributes)},
		{"invalid key", `{"ok":"1","bad key":"2"}`, nil, `key "bad key" is not a valid key`},
		{"invalid prefix", `{"-x-/a":"2"}`, nil, `key "-x-/a" is not a valid key`},
		{"empty key", `{"":"2"}`, nil, `key "" is not a valid key`},
		{"reserved", `{"csi.storage.k8s.io/pv/name":"x"}`, nil, `key "csi.storage.k8s.io/pv/name" is reserved`},
		{"collision", `{"endpoint":"http://elsewhere"}`, nil, `key "endpoint" is a parameter of StorageClass "fast"`},
		{"value too long", longValue, nil, fmt.Sprintf(`the value of key "k" is %d bytes long; at most %d`, MaxVolumeAttributeValueBytes+1, MaxVolumeAttributeValueBytes)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseVolumeAttributes(c.raw, class)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	if len(tooLong) <= MaxVolumeAttributesBytes || len(maxValue) > MaxVolumeAttributesBytes {
		t.Fatal("the fixtures do not straddle the bounds")
	}
}

func TestBuildVolumeAttributesBesideParameters(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"}}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "sc"},
		Parameters: map[string]string{"region": "eu", "csi.storage.k8s.io/fstype": "ext4"}}
	pv, err := BuildVolume(VolumeSpec{Provisioner: "p", PVC: pvc, Class: class, Handle: "h",
		Attributes: map[string]string{"bucketEndpoint": "http://x"}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"region": "eu", "bucketEndpoint": "http://x"}
	if got := pv.Spec.CSI.VolumeAttributes; !reflect.DeepEqual(got, want) {
		t.Errorf("volumeAttributes %v, want %v", got, want)
	}
}
