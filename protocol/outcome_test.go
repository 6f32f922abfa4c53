package protocol

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func strp(s string) *string { return &s }

func TestChooseHandle(t *testing.T) {
	for _, tc := range []struct {
		name        string
		field, file *string
		want        string
		wantErr     bool
	}{
		{"field wins", strp("f"), strp("file"), "f", false},
		{"file", nil, strp("from-file\n"), "from-file", false},
		{"default", nil, nil, "pvc-1", false},
		{"empty field", strp(""), nil, "", true},
		{"empty file", nil, strp(" \n"), "", true},
		{"128 bytes", nil, strp(strings.Repeat("h", 128)), strings.Repeat("h", 128), false},
		{"129 bytes", nil, strp(strings.Repeat("h", 129)), "", true},
		{"long field", strp(strings.Repeat("h", 4097)), nil, "", true},
		{"newline inside", nil, strp("a\nb"), "", true},
		{"NUL", strp("a\x00b"), nil, "", true},
		{"invalid UTF-8", nil, strp("a\xffb"), "", true},
		{"non-ASCII", strp("vol-ümlaut"), nil, "", true},
		{"shell", nil, strp("$(reboot)"), "", true},
		{"space", strp("a b"), nil, "", true},
		{"host:/path", strp("host:/export/vol"), nil, "host:/export/vol", false},
		{"dot", nil, strp(".\n"), "", true},
		{"dot dot", nil, strp(".."), "", true},
		{"slash", nil, strp("/"), "", true},
		{"escaping path", strp("../../etc"), nil, "", true},
		{"names separated by slashes are fine", strp("pool/vol-1"), nil, "pool/vol-1", false},
		{"a step aside", nil, strp("a//b"), "", true},
		{"dots inside are fine", nil, strp("a..b.c@1.5"), "a..b.c@1.5", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseHandle(tc.field, tc.file, "pvc-1")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestChooseCapacity(t *testing.T) {
	q := resource.MustParse("2Gi")
	for _, tc := range []struct {
		name    string
		field   *resource.Quantity
		file    *string
		hadPod  bool
		want    string
		wantErr string
	}{
		{"field wins", &q, strp("1"), true, "2Gi", ""},
		{"file bytes", nil, strp("1073741824\n"), true, "1073741824", ""},
		{"file suffix", nil, strp("1Gi"), true, "1Gi", ""},
		{"file garbage", nil, strp("lots"), true, "", "not a capacity"},
		{"missing with pod", nil, nil, true, "", "did not write /pav/capacity"},
		{"missing without pod", nil, nil, false, "", "no creation pod"},
		{"file zero", nil, strp("0"), true, "", "not positive"},
		{"field zero", resource.NewQuantity(0, resource.BinarySI), strp("1Gi"), true, "", "not positive"},
		{"file beyond int64", nil, strp("1e100"), true, "", "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChooseCapacity(tc.field, tc.file, tc.hadPod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("got %v, %v; want %s", got.String(), err, tc.want)
			}
		})
	}
}

func claimOf(req, limit string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: "u1"},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(req)}}}}
	if limit != "" {
		pvc.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(limit)}
	}
	return pvc
}

func TestCheckClaimCapacity(t *testing.T) {
	for _, tc := range []struct {
		capacity, req, limit string
		ok                   bool
	}{
		{"1Gi", "1Gi", "", true},
		{"2Gi", "1Gi", "", true},
		{"1073741823", "1Gi", "", false},
		{"2Gi", "1Gi", "2Gi", true},
		{"3Gi", "1Gi", "2Gi", false},
		{"0", "0", "", false},
		{"1e100", "1Gi", "", false},
		{"9223372036854775808", "1Gi", "", false},
		{"9223372036854775807", "1Gi", "", true},
	} {
		err := CheckClaimCapacity(resource.MustParse(tc.capacity), claimOf(tc.req, tc.limit))
		if (err == nil) != tc.ok {
			t.Errorf("capacity %s, request %s, limit %q: error %v, want ok=%v", tc.capacity, tc.req, tc.limit, err, tc.ok)
		}
	}
}

// What a claim's creation made: fields first, then the pod's files, then
// the defaults; refused when below the request.
func TestClaimVolume(t *testing.T) {
	pvc := claimOf("1Gi", "")
	field := resource.MustParse("2Gi")
	h, c, err := ClaimVolume(strp("vol-1"), &field, strp("ignored"), strp("3Gi"), true, pvc)
	if err != nil || h != "vol-1" || c.String() != "2Gi" {
		t.Errorf("fields: %q %s %v", h, c.String(), err)
	}
	h, c, err = ClaimVolume(nil, nil, strp(" from-file\n"), strp("3Gi\n"), true, pvc)
	if err != nil || h != "from-file" || c.String() != "3Gi" {
		t.Errorf("files: %q %s %v", h, c.String(), err)
	}
	small := resource.MustParse("512Mi")
	if _, _, err := ClaimVolume(nil, &small, nil, nil, false, pvc); err == nil || !strings.Contains(err.Error(), "less than the 1Gi the claim requests") {
		t.Errorf("a capacity below the request: %v", err)
	}
	if _, _, err := ClaimVolume(strp("../x"), &field, nil, nil, false, pvc); err == nil || !strings.Contains(err.Error(), "spec.volumeCreation.handle") {
		t.Errorf("a refused handle: %v", err)
	}
}
