// Command mkimg packs a root filesystem directory into a single-layer OCI image
// layout tarball that `ctr -n k8s.io images import` accepts, so images can be
// built on a machine without Docker or a registry.
//
//	mkimg -rootfs DIR -name docker.io/library/busybox:latest[,other:tag...] -out img.tar \
//	      [-entrypoint /pav] [-cmd sh,-c,...] [-env K=V,...] [-workdir /]
//
// Every name given in -name becomes an image in containerd sharing one manifest.
// Files are stored owned by root with a fixed timestamp, so the same rootfs gives
// the same image digest.
package main

import (
	"archive/tar"
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
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
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
	rootfs := flag.String("rootfs", "", "root filesystem directory")
	names := flag.String("name", "", "full image names, comma separated (e.g. docker.io/library/pav:latest)")
	out := flag.String("out", "", "output tarball")
	ep := flag.String("entrypoint", "", "entrypoint, comma separated")
	cmd := flag.String("cmd", "", "cmd, comma separated")
	env := flag.String("env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "environment, comma separated")
	workdir := flag.String("workdir", "/", "working directory")
	flag.Parse()
	if *rootfs == "" || *names == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*rootfs, split(*names), *out, split(*ep), split(*cmd), split(*env), *workdir); err != nil {
		log.Fatalf("mkimg: %v", err)
	}
}

func run(rootfs string, names []string, out string, ep, cmd, env []string, workdir string) error {
	// The layer is streamed to a temporary file while hashed: rootfs trees can be large.
	tmp, err := os.CreateTemp(filepath.Dir(out), ".layer-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	ch := &countingHash{h: sha256.New()}
	if err := writeLayer(rootfs, io.MultiWriter(tmp, ch)); err != nil {
		return err
	}
	layerDigest := "sha256:" + hex.EncodeToString(ch.h.Sum(nil))

	created := epoch.Format(time.RFC3339)
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      created,
		"config":       map[string]any{"Env": env, "Entrypoint": ep, "Cmd": cmd, "WorkingDir": workdir},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
		"history":      []map[string]any{{"created": created, "created_by": "mkimg"}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: sha(cfg), Size: int64(len(cfg))},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: ch.n}},
	})
	// One index entry per name: containerd's importer creates an image for each
	// descriptor carrying io.containerd.image.name.
	var manifests []descriptor
	for _, n := range names {
		manifests = append(manifests, descriptor{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: sha(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{"io.containerd.image.name": n, "org.opencontainers.image.ref.name": n[strings.LastIndex(n, ":")+1:]},
			Platform:    map[string]string{"architecture": "amd64", "os": "linux"},
		})
	}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests})
	// docker-save style manifest.json as well, for tools that want it
	dockerManifest, _ := json.Marshal([]map[string]any{{
		"Config": "blobs/sha256/" + sha(cfg)[7:], "RepoTags": names, "Layers": []string{"blobs/sha256/" + layerDigest[7:]},
	}})

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
	if err := tw.WriteHeader(&tar.Header{Name: "blobs/sha256/" + layerDigest[7:], Mode: 0o644, Size: ch.n, ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(tw, tmp); err != nil {
		return fmt.Errorf("copying layer: %w", err)
	}
	for _, b := range []struct {
		name string
		data []byte
	}{
		{"blobs/sha256/" + sha(cfg)[7:], cfg},
		{"blobs/sha256/" + sha(manifest)[7:], manifest},
		{"index.json", index},
		{"manifest.json", dockerManifest},
	} {
		if err := add(b.name, b.data); err != nil {
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
	fmt.Printf("%s: %s manifest %s, layer %d bytes\n", out, strings.Join(names, " "), sha(manifest), ch.n)
	return nil
}
