package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

// A module replaced by a directory (a fork in third_party; its version in
// the build information is "(devel)") is named, and given a purl, as the
// module it forks at its version, marked modified; one replaced by another
// module is that module.
func TestGoModule(t *testing.T) {
	for _, c := range []struct {
		m                   *debug.Module
		name, version, purl string
		modified            bool
	}{
		{&debug.Module{Path: "k8s.io/api", Version: "v0.37.2"}, "k8s.io/api", "v0.37.2", "pkg:golang/k8s.io/api@v0.37.2", false},
		{&debug.Module{Path: "github.com/nikolalohinski/gonja/v2", Version: "v2.9.1", Replace: &debug.Module{Path: "./third_party/gonja", Version: "(devel)"}},
			"github.com/nikolalohinski/gonja/v2", "v2.9.1", "pkg:golang/github.com/nikolalohinski/gonja/v2@v2.9.1", true},
		{&debug.Module{Path: "example.com/d", Version: "v0.1.0", Replace: &debug.Module{Path: "../d"}},
			"example.com/d", "v0.1.0", "pkg:golang/example.com/d@v0.1.0", true},
		{&debug.Module{Path: "example.com/a", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/b", Version: "v1.0.1"}},
			"example.com/b", "v1.0.1", "pkg:golang/example.com/b@v1.0.1", false},
		{&debug.Module{Path: "example.com/c", Version: "v2.0.0+incompatible"}, "example.com/c", "v2.0.0+incompatible", "pkg:golang/example.com/c@v2.0.0%2Bincompatible", false},
	} {
		p := goModule(c.m)
		if p.Name != c.name || p.VersionInfo != c.version || len(p.ExternalRefs) != 1 || p.ExternalRefs[0].Locator != c.purl || (p.Comment != "") != c.modified {
			t.Errorf("%s: %+v, want %s %s %s modified=%v", c.m.Path, p, c.name, c.version, c.purl, c.modified)
		}
	}
}

// writeFile writes a file, making its directory.
func writeFile(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The licence files of a directory: LICENSE* and COPYING* (not license.go),
// classified by licensecheck, several joined with AND; none, or one not
// recognised, is NOASSERTION.
func TestDirLicense(t *testing.T) {
	apache, err := os.ReadFile("../../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	mit, err := os.ReadFile("../../../third_party/gonja/LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	prose := []byte("You may use this only on Tuesdays, and must send the author a postcard each time you do.\n")
	for _, c := range []struct {
		name  string
		files map[string][]byte
		want  string
	}{
		{"apache", map[string][]byte{"LICENSE": apache, "license.go": prose, "README.md": prose}, "Apache-2.0"},
		{"md", map[string][]byte{"LICENSE.md": mit}, "MIT"},
		{"two", map[string][]byte{"LICENSE-APACHE": apache, "COPYING": mit}, "Apache-2.0 AND MIT"},
		{"unknown", map[string][]byte{"LICENSE": prose}, "NOASSERTION"},
		{"one unknown", map[string][]byte{"LICENSE": apache, "LICENSE.extra": prose}, "NOASSERTION"},
		{"none", map[string][]byte{"license.go": apache, "README": mit}, "NOASSERTION"},
	} {
		dir := filepath.Join(t.TempDir(), c.name)
		for name, content := range c.files {
			writeFile(t, filepath.Join(dir, name), content)
		}
		var l licenses
		if got, err := l.dir(dir); err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.name, got, err, c.want)
		}
	}
	var l licenses
	if got, err := l.dir(filepath.Join(t.TempDir(), "missing")); err != nil || got != "NOASSERTION" {
		t.Errorf("a missing directory: %q %v", got, err)
	}
}

// A Debian copyright file: the machine-readable format's License fields as
// SPDX expressions ("or", "and", "with X exception"), NOASSERTION if one is
// not an SPDX licence; an older free-form file by licensecheck.
func TestDebianCopyright(t *testing.T) {
	const format = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\nUpstream-Name: x\n\n"
	for _, c := range []struct{ text, want string }{
		{format + "Files: *\nCopyright: 2020 A\nLicense: GPL-2+ or Artistic\n\nFiles: lib/*\nCopyright: 2021 B\nLicense: Expat\n\n" +
			"License: Expat\n Permission is hereby granted, free of charge, ...\n", "(GPL-2.0-or-later OR Artistic-1.0) AND MIT"},
		{format + "Files: *\nLicense: GPL-3+ with Bison exception\n", "GPL-3.0-or-later WITH Bison-exception-2.2"},
		{format + "Files: *\nLicense: GPL-3+\n\nFiles: doc/*\nLicense: permissive\n", "NOASSERTION"},
		{format + "Files: *\nLicense: GPL-2+ with Frobnitz exception\n", "NOASSERTION"},
		{format + "Files: *\nCopyright: 2020 A\n", "NOASSERTION"},
	} {
		var l licenses
		if got := l.debianCopyright([]byte(c.text)); got != c.want {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
}

// The document: every package has a licence, from the main module's
// LICENSE, the module cache (paths escaped as the cache has them), GOROOT
// and the Debian copyright files; purls percent-encode '+'.
func TestBuildLicenses(t *testing.T) {
	exe, err := os.Executable() // this test binary: its build information lists modules
	if err != nil {
		t.Fatal(err)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok || len(info.Deps) == 0 {
		t.Fatal("no build information")
	}
	apache, err := os.ReadFile("../../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	mit, err := os.ReadFile("../../../third_party/gonja/LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := sources{modRoot: filepath.Join(dir, "pav"), modCache: filepath.Join(dir, "modcache"), goRoot: filepath.Join(dir, "goroot"),
		debDocs: []string{filepath.Join(dir, "doc1"), filepath.Join(dir, "doc2")}}
	writeFile(t, filepath.Join(src.modRoot, "LICENSE"), apache)
	writeFile(t, filepath.Join(src.goRoot, "LICENSE"), mit)
	for _, m := range info.Deps {
		d, err := src.moduleDir(m)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "LICENSE"), mit)
	}
	writeFile(t, filepath.Join(src.debDocs[0], "busybox-static", "copyright"),
		[]byte("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\nLicense: GPL-2\n"))
	writeFile(t, filepath.Join(src.debDocs[1], "busybox-static", "copyright"), []byte("Format: .../copyright-format/1.0/\n\nFiles: *\nLicense: MIT\n"))
	doc, err := build("pav", "v1.2.3", "2025-01-02T03:04:05Z", "https://example.com/pav", []string{exe},
		[]string{"busybox-static=1:1.35.0-4+deb12u1/amd64", "nonesuch=1.0/amd64"}, src)
	if err != nil {
		t.Fatal(err)
	}
	var d struct{ Packages []pkg }
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pav": "Apache-2.0", "stdlib": "MIT", "busybox-static": "GPL-2.0-only", "nonesuch": "NOASSERTION"}
	for _, m := range info.Deps {
		want[m.Path] = "MIT"
	}
	for _, p := range d.Packages {
		if w, ok := want[p.Name]; !ok || p.LicenseDeclared != w || p.LicenseConcluded != w {
			t.Errorf("%s: declared %q, concluded %q, want %q", p.Name, p.LicenseDeclared, p.LicenseConcluded, w)
		}
		delete(want, p.Name)
		if p.Name == "busybox-static" && p.ExternalRefs[0].Locator != "pkg:deb/debian/busybox-static@1:1.35.0-4%2Bdeb12u1?arch=amd64" {
			t.Errorf("busybox-static's purl %s", p.ExternalRefs[0].Locator)
		}
	}
	if len(want) > 0 {
		t.Errorf("no packages %v", want)
	}
}
