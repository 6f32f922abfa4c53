// Command sbom writes an SPDX 2.3 JSON software bill of materials of Go
// binaries (the modules `go version -m` lists, read with debug/buildinfo)
// and of Debian packages put beside them in an image.
//
//	sbom -name pav -version v0.3.0 -created 2025-01-02T03:04:05Z \
//	     -binary pav-linux-amd64,pav-linux-arm64 [-deb busybox-static=1:1.35.0-4/amd64,...] -out pav.spdx.json
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
	"net/url"
	"os"
	"runtime/debug"
	"sort"
	"strings"
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
	out := flag.String("out", "", "output file")
	flag.Parse()
	if *name == "" || *version == "" || *created == "" || *binaries == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	doc, err := build(*name, *version, *created, *source, strings.Split(*binaries, ","), split(*debs))
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

func build(name, version, created, source string, binaries, debs []string) ([]byte, error) {
	root := "SPDXRef-Package-" + name
	pkgs := []pkg{{Name: name, SPDXID: root, VersionInfo: version, DownloadLocation: source, PrimaryPurpose: "APPLICATION"}}
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
			ExternalRefs: []externalRef{purl("pkg:golang/stdlib@" + goVersion)}})
		for _, m := range info.Deps {
			addDep(goModule(m))
		}
	}
	for _, d := range debs {
		n, rest, ok := strings.Cut(d, "=")
		v, arch, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 {
			return nil, fmt.Errorf("-deb %q: want NAME=VERSION/ARCH", d)
		}
		addDep(pkg{Name: n, SPDXID: id("deb", n, v+"/"+arch), VersionInfo: v, Supplier: "Organization: Debian", DownloadLocation: "NOASSERTION",
			ExternalRefs: []externalRef{purl(fmt.Sprintf("pkg:deb/debian/%s@%s?arch=%s", n, url.PathEscape(v), arch))}})
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

// goModule is the SBOM entry of a module built into a binary. A module
// replaced by a directory (PaV's forks in third_party) has no version of its
// own: it is the module it forks, at that version, said to be modified.
func goModule(m *debug.Module) pkg {
	comment := ""
	if r := m.Replace; r != nil && r.Version == "" {
		comment = "modified: PaV's fork in " + strings.TrimPrefix(r.Path, "./") + " (its PAV.md lists the changes)"
	} else if r != nil {
		m = r
	}
	return pkg{Name: m.Path, SPDXID: id("go", m.Path, m.Version), VersionInfo: m.Version, DownloadLocation: "NOASSERTION", Comment: comment,
		ExternalRefs: []externalRef{purl("pkg:golang/" + m.Path + "@" + url.PathEscape(m.Version))}}
}

func purl(s string) externalRef { return externalRef{"PACKAGE-MANAGER", "purl", s} }

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
