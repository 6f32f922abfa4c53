package protocol

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
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
