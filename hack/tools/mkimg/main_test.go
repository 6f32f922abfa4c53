package main

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A multi-platform image: each name points to an index of one manifest per
// platform, every blob is stored under its digest, each config names its
// platform, and the annotations are on the manifests, the index and the
// configs' labels.
func TestMultiPlatformImage(t *testing.T) {
	dir := t.TempDir()
	var platforms []platform
	for _, arch := range []string{"amd64", "arm64"} {
		r := filepath.Join(dir, arch)
		if err := os.MkdirAll(r, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r, "pav"), []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		platforms = append(platforms, platform{"linux", arch, r})
	}
	out := filepath.Join(dir, "img.tar")
	ann := map[string]string{"org.opencontainers.image.version": "v9.9.9", "org.opencontainers.image.created": "2025-01-02T03:04:05Z"}
	if err := run(platforms, []string{"docker.io/library/pav:v9.9.9"}, out, []string{"/pav"}, nil, nil, "/", ann); err != nil {
		t.Fatal(err)
	}

	files := map[string][]byte{}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	blob := func(digest string) []byte {
		t.Helper()
		b, ok := files["blobs/sha256/"+digest[len("sha256:"):]]
		if !ok {
			t.Fatalf("blob %s missing", digest)
		}
		sum := sha256.Sum256(b)
		if "sha256:"+hex.EncodeToString(sum[:]) != digest {
			t.Fatalf("blob %s has another digest", digest)
		}
		return b
	}
	type desc struct {
		MediaType, Digest string
		Annotations       map[string]string
		Platform          map[string]string
	}
	var top struct{ Manifests []desc }
	if err := json.Unmarshal(files["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	if _, ok := files["manifest.json"]; ok {
		t.Error("a docker-save manifest.json for a multi-platform image")
	}
	if d := top.Manifests[0]; d.MediaType != "application/vnd.oci.image.index.v1+json" || d.Annotations["io.containerd.image.name"] != "docker.io/library/pav:v9.9.9" {
		t.Fatalf("index.json entry %+v", d)
	}
	var nested struct {
		Manifests   []desc
		Annotations map[string]string
	}
	if err := json.Unmarshal(blob(top.Manifests[0].Digest), &nested); err != nil || len(nested.Manifests) != 2 || nested.Annotations["org.opencontainers.image.version"] != "v9.9.9" {
		t.Fatalf("nested index %+v: %v", nested, err)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		d := nested.Manifests[i]
		if d.Platform["architecture"] != arch || d.Platform["os"] != "linux" {
			t.Errorf("manifest %d platform %v, want linux/%s", i, d.Platform, arch)
		}
		var m struct {
			Config      desc
			Layers      []desc
			Annotations map[string]string
		}
		if err := json.Unmarshal(blob(d.Digest), &m); err != nil || len(m.Layers) != 1 || m.Annotations["org.opencontainers.image.version"] != "v9.9.9" {
			t.Fatalf("manifest %s: %+v %v", arch, m, err)
		}
		var cfg struct {
			Architecture, Created string
			Config                struct{ Labels map[string]string }
		}
		if err := json.Unmarshal(blob(m.Config.Digest), &cfg); err != nil || cfg.Architecture != arch || cfg.Created != "2025-01-02T03:04:05Z" ||
			cfg.Config.Labels["org.opencontainers.image.version"] != "v9.9.9" {
			t.Errorf("config of %s: %+v %v", arch, cfg, err)
		}
		blob(m.Layers[0].Digest)
	}
}
