// Command sbom writes an SPDX 2.3 JSON software bill of materials of Go
// binaries (the modules `go version -m` lists, read with debug/buildinfo)
// and of Debian packages put beside them in an image.
//
//	sbom -name pav -version v0.3.0 -created 2025-01-02T03:04:05Z \
//	     -binary pav-linux-amd64,pav-linux-arm64 [-deb busybox-static=1:1.35.0-4/amd64,...] \
//	     [-debdoc DIR,...] [-modroot .] -out pav.spdx.json
//
// Each package has its licence (licenseDeclared, and licenseConcluded the
// same): the described program's from the LICENSE of its module (-modroot),
// a Go module's from the licence files in the module cache (or, for a
// module replaced by a directory, in that directory), Go's from GOROOT, all
// classified by licensecheck; a Debian package's from DIR/PKG/copyright of
// the first -debdoc directory that has one. NOASSERTION where none is found.
//
// The same inputs give the same document (no random namespace, no clock).
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

type externalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type pkg struct {
	Name             string        `json:"name"`
	SPDXID           string        `json:"SPDXID"`
	VersionInfo      string        `json:"versionInfo,omitempty"`
	Supplier         string        `json:"supplier,omitempty"`
	DownloadLocation string        `json:"downloadLocation"`
	FilesAnalyzed    bool          `json:"filesAnalyzed"`
	LicenseConcluded string        `json:"licenseConcluded"`
	LicenseDeclared  string        `json:"licenseDeclared"`
	PrimaryPurpose   string        `json:"primaryPackagePurpose,omitempty"`
	ExternalRefs     []externalRef `json:"externalRefs,omitempty"`
	Comment          string        `json:"comment,omitempty"`
}

type relationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

func main() {
	name := flag.String("name", "", "what the document describes (e.g. pav)")
	version := flag.String("version", "", "its version")
	created := flag.String("created", "", "creation time, RFC 3339 (e.g. the commit's)")
	source := flag.String("source", "https://github.com/albertofaria/pav", "where its source is")
	binaries := flag.String("binary", "", "Go binaries, comma separated")
	debs := flag.String("deb", "", "Debian packages in the image, NAME=VERSION/ARCH, comma separated")
	debDoc := flag.String("debdoc", "/usr/share/doc", "directories with the Debian packages' PKG/copyright, comma separated, first found wins")
	modRoot := flag.String("modroot", ".", "the root of the binaries' main module (its LICENSE, and the directories of replace directives)")
	out := flag.String("out", "", "output file")
	flag.Parse()
	if *name == "" || *version == "" || *created == "" || *binaries == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	env, err := exec.Command("go", "env", "GOMODCACHE", "GOROOT").Output()
	if err != nil {
		log.Fatalf("sbom: go env: %v", err)
	}
	goEnv := strings.Split(strings.TrimSpace(string(env)), "\n")
	if len(goEnv) != 2 {
		log.Fatalf("sbom: go env GOMODCACHE GOROOT: %q", env)
	}
	src := sources{modRoot: *modRoot, modCache: goEnv[0], goRoot: goEnv[1], debDocs: split(*debDoc)}
	doc, err := build(*name, *version, *created, *source, strings.Split(*binaries, ","), split(*debs), src)
	if err != nil {
		log.Fatalf("sbom: %v", err)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		log.Fatalf("sbom: %v", err)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// sources are where the packages' licences are read.
type sources struct {
	modRoot  string   // the main module's directory
	modCache string   // GOMODCACHE
	goRoot   string   // GOROOT: Go's licence (the same for every release)
	debDocs  []string // directories of Debian packages' PKG/copyright
}

// moduleDir is where a module built into a binary is on this machine.
func (s sources) moduleDir(m *debug.Module) (string, error) {
	if r := m.Replace; isDirReplace(r) {
		if filepath.IsAbs(r.Path) {
			return r.Path, nil
		}
		return filepath.Join(s.modRoot, r.Path), nil
	}
	if r := m.Replace; r != nil {
		m = r
	}
	p, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	v, err := module.EscapeVersion(m.Version)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.modCache, p+"@"+v), nil
}

// debianLicense is a Debian package's licence from the first copyright file
// found; NOASSERTION without one.
func (s sources) debianLicense(l *licenses, name string) (string, error) {
	for _, d := range s.debDocs {
		text, err := os.ReadFile(filepath.Join(d, name, "copyright"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", err
		}
		return l.debianCopyright(text), nil
	}
	return noAssertion, nil
}

func build(name, version, created, source string, binaries, debs []string, src sources) ([]byte, error) {
	var lic licenses
	root := "SPDXRef-Package-" + name
	own, err := lic.dir(src.modRoot)
	if err != nil {
		return nil, err
	}
	goLicense, err := lic.dir(src.goRoot)
	if err != nil {
		return nil, err
	}
	pkgs := []pkg{{Name: name, SPDXID: root, VersionInfo: version, DownloadLocation: source, PrimaryPurpose: "APPLICATION",
		LicenseConcluded: own, LicenseDeclared: own}}
	rels := []relationship{{"SPDXRef-DOCUMENT", "DESCRIBES", root}}
	seen := map[string]bool{}
	addDep := func(p pkg) {
		if seen[p.SPDXID] {
			return
		}
		seen[p.SPDXID] = true
		pkgs = append(pkgs, p)
		rels = append(rels, relationship{root, "DEPENDS_ON", p.SPDXID})
	}
	for _, b := range binaries {
		info, err := buildinfo.ReadFile(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b, err)
		}
		goVersion := strings.TrimPrefix(info.GoVersion, "go")
		addDep(pkg{Name: "stdlib", SPDXID: id("go", "stdlib", goVersion), VersionInfo: goVersion, DownloadLocation: "https://go.dev/dl/",
			LicenseConcluded: goLicense, LicenseDeclared: goLicense, ExternalRefs: []externalRef{purl("pkg:golang/stdlib@" + goVersion)}})
		for _, m := range info.Deps {
			p := goModule(m)
			dir, err := src.moduleDir(m)
			if err != nil {
				return nil, fmt.Errorf("%s: module %s: %w", b, m.Path, err)
			}
			if p.LicenseDeclared, err = lic.dir(dir); err != nil {
				return nil, fmt.Errorf("%s: module %s: %w", b, m.Path, err)
			}
			p.LicenseConcluded = p.LicenseDeclared
			if p.LicenseDeclared == noAssertion && !seen[p.SPDXID] {
				log.Printf("sbom: warning: no licence recognised for %s %s in %s", p.Name, p.VersionInfo, dir)
			}
			addDep(p)
		}
	}
	for _, d := range debs {
		n, rest, ok := strings.Cut(d, "=")
		v, arch, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 {
			return nil, fmt.Errorf("-deb %q: want NAME=VERSION/ARCH", d)
		}
		l, err := src.debianLicense(&lic, n)
		if err != nil {
			return nil, fmt.Errorf("-deb %s: %w", n, err)
		}
		addDep(pkg{Name: n, SPDXID: id("deb", n, v+"/"+arch), VersionInfo: v, Supplier: "Organization: Debian", DownloadLocation: "NOASSERTION",
			LicenseConcluded: l, LicenseDeclared: l, ExternalRefs: []externalRef{purl(fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", n, purlVersion(v), arch))}})
	}
	sort.SliceStable(pkgs[1:], func(i, j int) bool { return pkgs[1+i].SPDXID < pkgs[1+j].SPDXID })
	sort.SliceStable(rels[1:], func(i, j int) bool { return rels[1+i].Related < rels[1+j].Related })
	body := map[string]any{
		"spdxVersion":       "SPDX-2.3",
		"dataLicense":       "CC0-1.0",
		"SPDXID":            "SPDXRef-DOCUMENT",
		"name":              name + "-" + version,
		"creationInfo":      map[string]any{"created": created, "creators": []string{"Tool: pav-hack-sbom"}},
		"packages":          pkgs,
		"relationships":     rels,
		"documentDescribes": []string{root},
	}
	if infos := lic.infos(); len(infos) > 0 {
		body["hasExtractedLicensingInfos"] = infos
	}
	// The namespace must be unique per document: derive it from the content.
	content, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(content)
	body["documentNamespace"] = fmt.Sprintf("%s/spdx/%s-%s-%s", source, name, version, hex.EncodeToString(sum[:8]))
	out, err := json.MarshalIndent(body, "", "  ")
	return append(out, '\n'), err
}

// isDirReplace says whether a module is replaced by a directory (go.mod's
// "=> ./dir"; the build information gives it the version "(devel)").
func isDirReplace(r *debug.Module) bool { return r != nil && modfile.IsDirectoryPath(r.Path) }

// goModule is the SBOM entry of a module built into a binary. A module
// replaced by a directory (PaV's forks in third_party) has no version of its
// own: it is the module it forks, at that version, said to be modified.
func goModule(m *debug.Module) pkg {
	comment := ""
	if r := m.Replace; isDirReplace(r) {
		comment = "modified: PaV's fork in " + strings.TrimPrefix(r.Path, "./") + " (its PAV.md lists the changes)"
	} else if r != nil {
		m = r
	}
	return pkg{Name: m.Path, SPDXID: id("go", m.Path, m.Version), VersionInfo: m.Version, DownloadLocation: "NOASSERTION", Comment: comment,
		LicenseConcluded: noAssertion, LicenseDeclared: noAssertion,
		ExternalRefs: []externalRef{purl("pkg:golang/" + m.Path + "@" + purlVersion(m.Version))}}
}

func purl(s string) externalRef { return externalRef{"PACKAGE-MANAGER", "purl", s} }

// purlVersion is a version as a purl has it: percent-encoded but for the
// unreserved characters and ':' (purl's rule; url.PathEscape would keep '+').
func purlVersion(v string) string {
	var b strings.Builder
	for _, c := range []byte(v) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_~:", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// id is an SPDX identifier: letters, digits, '.' and '-' only.
func id(kind, name, version string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				return r
			}
			return '-'
		}, s)
	}
	return "SPDXRef-" + kind + "-" + clean(name) + "-" + clean(version)
}
