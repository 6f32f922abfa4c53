// Command mkimg packs a root filesystem directory into a single-layer OCI image
// layout tarball that `ctr -n k8s.io images import` accepts, so images can be
// built on a machine without Docker or a registry.
//
//	mkimg -rootfs DIR -name docker.io/library/busybox:latest[,other:tag...] -out img.tar \
//	      [-entrypoint /pav] [-cmd sh,-c,...] [-env K=V,...] [-workdir /] [-annotation K=V,...]
//
// With -rootfs linux/amd64=DIR1,linux/arm64=DIR2 the image is multi-platform:
// each name points to an OCI image index of one manifest per platform.
//
// Every name given in -name becomes an image in containerd sharing one manifest.
// Files are stored owned by root with a fixed timestamp, so the same rootfs gives
// the same image digest.
//
// With -compress gzip the layers are gzip-compressed (what a registry serves;
// the config's diff_ids stay the uncompressed tars' digests). The gzip header
// carries no name and no time, so the digest is still a function of the rootfs
// (and of the Go release's compress/flate). Without it the layers are plain
// tars: cheaper where the archive never leaves the machine (`ctr import`
// decompresses it again).
//
// With -sbom FILE the archive also holds the SBOM as an OCI 1.1 artifact
// whose subject is the image (see sbomReferrer).
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

type descriptor struct {
	MediaType    string            `json:"mediaType"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	Platform     map[string]string `json:"platform,omitempty"`
}

var epoch = time.Unix(0, 0).UTC()

// countingHash hashes and counts what is written to it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// writeLayer writes an uncompressed tar of root to w, in sorted path order.
func writeLayer(root string, w io.Writer) error {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walking %s: %w", root, err)
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	hardlinks := map[[2]uint64]string{} // (dev, inode) -> first name, to keep hard links as links
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSocket != 0 {
			continue // sockets cannot be stored in a layer
		}
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, _ := filepath.Rel(root, p)
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, seen := hardlinks[key]; seen {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				hardlinks[key] = h.Name
			}
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "root", "root"
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return tw.Close()
}

func sha(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func main() {
	rootfs := flag.String("rootfs", "", "root filesystem directory (an image for linux/amd64), or PLATFORM=DIR,... for a multi-platform image, e.g. linux/amd64=a,linux/arm64=b")
	names := flag.String("name", "", "full image names, comma separated (e.g. docker.io/library/pav:latest)")
	out := flag.String("out", "", "output tarball")
	ep := flag.String("entrypoint", "", "entrypoint, comma separated")
	cmd := flag.String("cmd", "", "cmd, comma separated")
	env := flag.String("env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "environment, comma separated")
	workdir := flag.String("workdir", "/", "working directory")
	annotations := flag.String("annotation", "", "KEY=VALUE,... annotations of the manifests and index (e.g. org.opencontainers.image.version=v1), also the image's labels")
	compress := flag.String("compress", "none", "layer compression: none or gzip")
	sbom := flag.String("sbom", "", "an SPDX JSON SBOM to attach to the image as an OCI 1.1 referrer (artifactType "+sbomMediaType+")")
	flag.Parse()
	if *rootfs == "" || *names == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	platforms, err := parsePlatforms(*rootfs)
	if err != nil {
		log.Fatalf("mkimg: %v", err)
	}
	ann := map[string]string{}
	for _, kv := range split(*annotations) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			log.Fatalf("mkimg: -annotation %q: want KEY=VALUE", kv)
		}
		ann[k] = v
	}
	if *compress != "none" && *compress != "gzip" {
		log.Fatalf("mkimg: -compress %q: want none or gzip", *compress)
	}
	opts := options{entrypoint: split(*ep), cmd: split(*cmd), env: split(*env), workdir: *workdir, annotations: ann, gzip: *compress == "gzip", sbom: *sbom}
	if err := run(platforms, split(*names), *out, opts); err != nil {
		log.Fatalf("mkimg: %v", err)
	}
}

// platform is one image of a (maybe multi-platform) image: its OS,
// architecture and root filesystem.
type platform struct{ os, arch, rootfs string }

func parsePlatforms(s string) ([]platform, error) {
	if !strings.Contains(s, "=") {
		return []platform{{"linux", "amd64", s}}, nil
	}
	var out []platform
	for _, item := range split(s) {
		p, dir, ok := strings.Cut(item, "=")
		osName, arch, ok2 := strings.Cut(p, "/")
		if !ok || !ok2 || dir == "" {
			return nil, fmt.Errorf("-rootfs %q: want OS/ARCH=DIR", item)
		}
		out = append(out, platform{osName, arch, dir})
	}
	return out, nil
}

type blob struct {
	digest string
	size   int64
	data   []byte   // or
	file   *os.File // the layer, streamed
}

// options are the image's configuration and how its layers are stored.
type options struct {
	entrypoint, cmd, env []string
	workdir              string
	annotations          map[string]string // of the manifests and index, and the config's labels
	gzip                 bool              // gzip-compressed layers
	sbom                 string            // an SPDX JSON file to attach as a referrer of the image
}

// sbomMediaType is an SPDX JSON document's, the artifactType scanners look
// for among an image's referrers.
const sbomMediaType = "application/spdx+json"

// sbomReferrer packs an SBOM as an OCI 1.1 artifact whose subject is the
// image: an index.json entry (no image name, so containerd's import makes
// no image of it) that a push carries to the registry, where tools find it
// by the image's digest (the referrers API, or its tag fallback
// sha256-DIGEST). It returns the blobs and the entry.
func sbomReferrer(path string, subject descriptor, created string) ([]blob, descriptor, error) {
	doc, err := os.ReadFile(path)
	if err != nil {
		return nil, descriptor{}, fmt.Errorf("the SBOM: %w", err)
	}
	if !json.Valid(doc) {
		return nil, descriptor{}, fmt.Errorf("the SBOM %s is not JSON", path)
	}
	empty := []byte("{}") // OCI 1.1's empty config of artifacts
	subject.Annotations = nil
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"artifactType":  sbomMediaType,
		"config":        descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: sha(empty), Size: int64(len(empty))},
		"layers": []descriptor{{MediaType: sbomMediaType, Digest: sha(doc), Size: int64(len(doc)),
			Annotations: map[string]string{"org.opencontainers.image.title": filepath.Base(path)}}},
		"subject":     subject,
		"annotations": map[string]string{"org.opencontainers.image.created": created},
	})
	blobs := []blob{{digest: sha(doc), size: int64(len(doc)), data: doc}, {digest: sha(empty), size: int64(len(empty)), data: empty},
		{digest: sha(manifest), size: int64(len(manifest)), data: manifest}}
	return blobs, descriptor{MediaType: "application/vnd.oci.image.manifest.v1+json", ArtifactType: sbomMediaType, Digest: sha(manifest), Size: int64(len(manifest))}, nil
}

// layer writes root's layer to w, gzip-compressed or not, and returns the
// digest of the uncompressed tar (the config's diff_id).
func layer(root string, w io.Writer, compress bool) (diffID string, err error) {
	diff := sha256.New()
	if !compress {
		err := writeLayer(root, io.MultiWriter(w, diff))
		return "sha256:" + hex.EncodeToString(diff.Sum(nil)), err
	}
	// A zero Header: no name, no modification time, OS "unknown".
	zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
	if err != nil {
		return "", err
	}
	if err := writeLayer(root, io.MultiWriter(zw, diff)); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("compressing the layer of %s: %w", root, err)
	}
	return "sha256:" + hex.EncodeToString(diff.Sum(nil)), nil
}

func run(platforms []platform, names []string, out string, o options) error {
	ep, cmd, env, workdir, ann := o.entrypoint, o.cmd, o.env, o.workdir, o.annotations
	layerType := "application/vnd.oci.image.layer.v1.tar"
	if o.gzip {
		layerType += "+gzip"
	}
	var blobs []blob
	var manifests []descriptor // one per platform
	var dockerManifest []byte  // single-platform images only
	created := epoch.Format(time.RFC3339)
	if c := ann["org.opencontainers.image.created"]; c != "" {
		created = c
	}
	for _, pl := range platforms {
		// The layer is streamed to a temporary file while hashed: rootfs trees can be large.
		tmp, err := os.CreateTemp(filepath.Dir(out), ".layer-*")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		ch := &countingHash{h: sha256.New()}
		diffID, err := layer(pl.rootfs, io.MultiWriter(tmp, ch), o.gzip)
		if err != nil {
			return err
		}
		layerDigest := "sha256:" + hex.EncodeToString(ch.h.Sum(nil))
		config := map[string]any{"Env": env, "Entrypoint": ep, "Cmd": cmd, "WorkingDir": workdir}
		if len(ann) > 0 {
			config["Labels"] = ann
		}
		cfg, _ := json.Marshal(map[string]any{
			"architecture": pl.arch,
			"os":           pl.os,
			"created":      created,
			"config":       config,
			"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
			"history":      []map[string]any{{"created": created, "created_by": "mkimg"}},
		})
		manifest, _ := json.Marshal(withAnnotations(map[string]any{
			"schemaVersion": 2,
			"mediaType":     "application/vnd.oci.image.manifest.v1+json",
			"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: sha(cfg), Size: int64(len(cfg))},
			"layers":        []descriptor{{MediaType: layerType, Digest: layerDigest, Size: ch.n}},
		}, ann))
		blobs = append(blobs, blob{digest: layerDigest, size: ch.n, file: tmp},
			blob{digest: sha(cfg), size: int64(len(cfg)), data: cfg}, blob{digest: sha(manifest), size: int64(len(manifest)), data: manifest})
		manifests = append(manifests, descriptor{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: sha(manifest), Size: int64(len(manifest)),
			Platform: map[string]string{"architecture": pl.arch, "os": pl.os}})
		// docker-save style manifest.json as well, for tools that want it
		dockerManifest, _ = json.Marshal([]map[string]any{{
			"Config": "blobs/sha256/" + sha(cfg)[7:], "RepoTags": names, "Layers": []string{"blobs/sha256/" + layerDigest[7:]},
		}})
	}
	// What each name points to: the one manifest, or an index of the
	// platforms' manifests.
	target := manifests[0]
	if len(platforms) > 1 {
		dockerManifest = nil // docker save's format has one platform
		nested, _ := json.Marshal(withAnnotations(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
			"manifests": manifests}, ann))
		blobs = append(blobs, blob{digest: sha(nested), size: int64(len(nested)), data: nested})
		target = descriptor{MediaType: "application/vnd.oci.image.index.v1+json", Digest: sha(nested), Size: int64(len(nested))}
	}
	// One index entry per name: containerd's importer creates an image for each
	// descriptor carrying io.containerd.image.name.
	var entries []descriptor
	for _, n := range names {
		d := target
		d.Annotations = map[string]string{"io.containerd.image.name": n, "org.opencontainers.image.ref.name": n[strings.LastIndex(n, ":")+1:]}
		entries = append(entries, d)
	}
	if o.sbom != "" {
		bs, artifact, err := sbomReferrer(o.sbom, target, created)
		if err != nil {
			return err
		}
		blobs = append(blobs, bs...)
		entries = append(entries, artifact)
	}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries})

	if err := writeLayout(out, blobs, index, dockerManifest); err != nil {
		return err
	}
	fmt.Printf("%s: %s %s %s\n", out, strings.Join(names, " "), strings.TrimSuffix(strings.TrimPrefix(target.MediaType, "application/vnd.oci.image."), ".v1+json"), target.Digest)
	return nil
}

// writeLayout writes the OCI layout tarball out (through out.tmp, renamed
// once complete): its blobs (each digest once), index.json and, for a
// single platform, docker save's manifest.json.
func writeLayout(out string, blobs []blob, index, dockerManifest []byte) error {
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, ModTime: epoch, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	written := map[string]bool{}
	for _, b := range blobs {
		if written[b.digest] { // the same layer for two platforms
			continue
		}
		written[b.digest] = true
		name := "blobs/sha256/" + b.digest[7:]
		if b.file == nil {
			if err := add(name, b.data); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: b.size, ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := b.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(tw, b.file); err != nil {
			return fmt.Errorf("copying layer: %w", err)
		}
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	if dockerManifest != nil {
		if err := add("manifest.json", dockerManifest); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return err
	}
	return nil
}

// withAnnotations adds an "annotations" member to a manifest or index,
// unless there are none (the member is optional, null is not allowed).
func withAnnotations(m map[string]any, ann map[string]string) map[string]any {
	if len(ann) > 0 {
		m["annotations"] = ann
	}
	return m
}
