package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/albertofaria/pav/internal/cmdtest"
)

// TestReadBuildInfo: the stamped version beside the build info's commit and
// dirty flag, else the stamped ones, else an unknown commit.
func TestReadBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.modified", Value: "true"},
	}}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		name                   string
		version, commit, dirty string
		bi                     *debug.BuildInfo
		ok                     bool
		want                   buildInfo
	}{
		{"build info, dirty", "v1.2.3", "", "", bi, true, buildInfo{"v1.2.3", "0123456789abcdef0123456789abcdef01234567", true, runtime.Version(), platform}},
		{"build info over stamped", "dev", "fedcba", "true", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}}, true, buildInfo{"dev", "abc", false, runtime.Version(), platform}},
		{"stamped, no vcs in build info", "v1.2.3", "fedcba", "true", &debug.BuildInfo{}, true, buildInfo{"v1.2.3", "fedcba", true, runtime.Version(), platform}},
		{"nothing", "dev", "", "", &debug.BuildInfo{}, true, buildInfo{"dev", "unknown", false, runtime.Version(), platform}},
		{"no build info", "dev", "fedcba", "false", nil, false, buildInfo{"dev", "fedcba", false, runtime.Version(), platform}},
	} {
		if d := cmp.Diff(c.want, readBuildInfo(c.version, c.commit, c.dirty, c.bi, c.ok)); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}

// TestVersionCommand: text by default, JSON with -o json, any other format refused.
func TestVersionCommand(t *testing.T) {
	want := currentBuildInfo()
	out, _, err := cmdtest.Run(t, newVersionCmd())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "version:  "+want.Version+"\ncommit:   "+want.Commit+"\n") || !strings.Contains(out, "go:       "+want.GoVersion+"\n") {
		t.Errorf("pav version:\n%s", out)
	}
	out, _, err = cmdtest.Run(t, newVersionCmd(), "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var got buildInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("pav version -o json: %v\n%s", err, out)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pav version -o json (-want +got):\n%s", d)
	}
	if _, _, err := cmdtest.Run(t, newVersionCmd(), "-o", "xml"); err == nil || !strings.Contains(err.Error(), `--output "xml"`) {
		t.Errorf("pav version -o xml: %v", err)
	}
}

// TestVersionStamped builds pav as the Makefile and the image build do
// (-ldflags from hack/version.sh) and asks the binary: the version given, the
// checkout's commit and whether it has changes.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "pav")
	status, err := exec.Command("git", "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	stamp := exec.Command("../../hack/version.sh")
	stamp.Env = append(os.Environ(), "VERSION=v9.8.7-test")
	ldflags, err := stamp.Output()
	if err != nil {
		t.Fatalf("hack/version.sh: %v", err)
	}
	build := exec.Command("go", "build", "-trimpath", "-ldflags", strings.TrimSpace(string(ldflags)), "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("pav version -o json: %v", err)
	}
	var got buildInfo
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("pav version -o json: %v\n%s", err, out)
	}
	want := buildInfo{"v9.8.7-test", strings.TrimSpace(string(head)), len(status) > 0, runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pav version -o json (-want +got):\n%s", d)
	}
}
