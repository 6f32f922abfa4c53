package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	if err := run(platforms, []string{"docker.io/library/pav:v9.9.9"}, out, options{entrypoint: []string{"/pav"}, workdir: "/", annotations: ann}); err != nil {
		t.Fatal(err)
	}

	files := readArchive(t, out)
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

// readArchive returns the files of a tar archive by name.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

func digestOf(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }

// imageLayer builds a single-platform image of root into out and returns its
// manifest's layer descriptor, the layer's bytes and the config's diff_ids.
func imageLayer(t *testing.T, root, out string, gz bool) (mediaType, digest string, layer []byte, diffIDs []string) {
	t.Helper()
	if err := run([]platform{{"linux", "amd64", root}}, []string{"docker.io/library/x:1"}, out, options{workdir: "/", gzip: gz}); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, out)
	var index struct{ Manifests []struct{ Digest string } }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	var m struct {
		Config struct{ Digest string }
		Layers []struct{ MediaType, Digest string }
	}
	if err := json.Unmarshal(files["blobs/sha256/"+index.Manifests[0].Digest[7:]], &m); err != nil || len(m.Layers) != 1 {
		t.Fatalf("manifest: %+v %v", m, err)
	}
	var cfg struct {
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(files["blobs/sha256/"+m.Config.Digest[7:]], &cfg); err != nil {
		t.Fatal(err)
	}
	l := files["blobs/sha256/"+m.Layers[0].Digest[7:]]
	if digestOf(l) != m.Layers[0].Digest {
		t.Fatalf("layer blob %s has digest %s", m.Layers[0].Digest, digestOf(l))
	}
	return m.Layers[0].MediaType, m.Layers[0].Digest, l, cfg.RootFS.DiffIDs
}

// A gzip layer decompresses to the tar the config's diff_id names (the
// uncompressed image's layer), its gzip header has no name or time, and the
// same rootfs gives the same digest again after its files' times changed.
func TestGzipLayer(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"bin/pav": strings.Repeat("a binary ", 10000), "etc-passwd": "root:x:0:0::/:/bin/sh\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plainType, plainDigest, _, _ := imageLayer(t, root, filepath.Join(dir, "plain.tar"), false)
	if plainType != "application/vnd.oci.image.layer.v1.tar" {
		t.Errorf("uncompressed layer's media type %s", plainType)
	}
	mediaType, digest, layer, diffIDs := imageLayer(t, root, filepath.Join(dir, "gz1.tar"), true)
	if mediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Errorf("media type %s, want application/vnd.oci.image.layer.v1.tar+gzip", mediaType)
	}
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header has name %q, time %v", zr.Name, zr.ModTime)
	}
	tarBytes, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if len(diffIDs) != 1 || diffIDs[0] != digestOf(tarBytes) || diffIDs[0] != plainDigest {
		t.Errorf("diff_ids %v; the decompressed layer is %s, the uncompressed image's layer %s", diffIDs, digestOf(tarBytes), plainDigest)
	}
	if len(layer) >= len(tarBytes)/2 {
		t.Errorf("compressed layer %d bytes, uncompressed %d", len(layer), len(tarBytes))
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "bin/pav"), later, later); err != nil {
		t.Fatal(err)
	}
	if _, again, _, _ := imageLayer(t, root, filepath.Join(dir, "gz2.tar"), true); again != digest {
		t.Errorf("second build's layer %s, first %s", again, digest)
	}
}

// With an SBOM the archive holds an OCI 1.1 artifact whose subject is the
// image (the descriptor each name points to), its one layer the SBOM under
// its file name, its config OCI's empty descriptor; its index.json entry
// has the artifactType and no image name (containerd's import makes no image
// of it). A file that is not JSON is refused.
func TestSBOMReferrer(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "rootfs")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pav"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	sbom := filepath.Join(dir, "pav-v1.0.0.spdx.json")
	doc := []byte(`{"spdxVersion": "SPDX-2.3", "name": "pav-v1.0.0"}` + "\n")
	if err := os.WriteFile(sbom, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	platforms := []platform{{"linux", "amd64", root}, {"linux", "arm64", root}}
	if err := run(platforms, []string{"docker.io/library/pav:v1.0.0"}, out, options{workdir: "/", gzip: true, sbom: sbom}); err != nil {
		t.Fatal(err)
	}
	files := readArchive(t, out)
	type desc struct {
		MediaType, ArtifactType, Digest string
		Size                            int64
		Annotations                     map[string]string
	}
	var index struct{ Manifests []desc }
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 2 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	image, entry := index.Manifests[0], index.Manifests[1]
	if image.Annotations["io.containerd.image.name"] != "docker.io/library/pav:v1.0.0" || image.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Fatalf("image entry %+v", image)
	}
	if entry.ArtifactType != "application/spdx+json" || entry.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(entry.Annotations) != 0 {
		t.Fatalf("SBOM entry %+v", entry)
	}
	raw := files["blobs/sha256/"+entry.Digest[7:]]
	if digestOf(raw) != entry.Digest || int64(len(raw)) != entry.Size {
		t.Fatalf("SBOM manifest blob %s: digest %s, %d bytes", entry.Digest, digestOf(raw), len(raw))
	}
	var m struct {
		ArtifactType string
		Config       desc
		Layers       []desc
		Subject      desc
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != "application/spdx+json" || m.Subject.Digest != image.Digest || m.Subject.Size != image.Size || m.Subject.MediaType != image.MediaType {
		t.Errorf("artifact type %s, subject %+v; the image is %+v", m.ArtifactType, m.Subject, image)
	}
	const emptyDigest = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" // the OCI image spec's
	if m.Config.MediaType != "application/vnd.oci.empty.v1+json" || m.Config.Digest != emptyDigest || string(files["blobs/sha256/"+emptyDigest[7:]]) != "{}" {
		t.Errorf("config %+v", m.Config)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != "application/spdx+json" || m.Layers[0].Annotations["org.opencontainers.image.title"] != "pav-v1.0.0.spdx.json" ||
		!bytes.Equal(files["blobs/sha256/"+m.Layers[0].Digest[7:]], doc) {
		t.Errorf("layers %+v", m.Layers)
	}

	if err := os.WriteFile(sbom, []byte("SPDXVersion: SPDX-2.3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(platforms, []string{"docker.io/library/pav:v1.0.0"}, filepath.Join(dir, "bad.tar"), options{workdir: "/", sbom: sbom}); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("an SBOM that is not JSON: %v", err)
	}
}
