package main

import (
	"strings"
	"testing"
)

func TestParsePoolKubeletDirs(t *testing.T) {
	got, err := parsePoolKubeletDirs([]string{"pav-cluster.local/kubelet-root=k0s:/var/lib/k0s/kubelet", "a=b,c=d:/x/kubelet"})
	if err != nil || len(got) != 2 || got[0].Selector.String() != "pav-cluster.local/kubelet-root=k0s" || got[0].Dir != "/var/lib/k0s/kubelet" ||
		got[1].Selector.String() != "a=b,c=d" || got[1].Dir != "/x/kubelet" {
		t.Fatalf("got %+v, %v", got, err)
	}
	for value, want := range map[string]string{
		"/var/lib/k0s/kubelet":  "want <label selector>:<dir>",
		":/var/lib/k0s/kubelet": "want a non-empty selector",
		"a=b:relative":          "not an absolute, clean path",
		"a=b:/":                 "not an absolute, clean path",
		"a in (b:/var/lib/x":    "label selector",
	} {
		if _, err := parsePoolKubeletDirs([]string{value}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", value, err, want)
		}
	}
}
