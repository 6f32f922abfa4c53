package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"github.com/google/licensecheck"
)

// noAssertion is SPDX's "not known": no licence file found, or one not
// recognised well enough to state its licence.
const noAssertion = "NOASSERTION"

// minCoverage is how much of a licence file (percent of its words)
// licensecheck must recognise for its licences to be stated; pkg.go.dev uses
// the same threshold. A file mostly of unknown text may grant anything.
const minCoverage = 75

// nonSPDX are licensecheck's identifiers that are not on the SPDX licence
// list (licensecheck's licenses/README.md, "added"): the document names them
// LicenseRef-ID and carries their text.
var nonSPDX = map[string]bool{
	"Aladdin-9": true, "Anti996": true, "BSD-1-Clause-Clear": true, "BSD-3-Clause-NoTrademark": true,
	"CC-BY-NC-SA-3.0-US": true, "CommonsClause": true, "GooglePatentClause": true, "GooglePatentsFile": true,
	"LGPL-2.0-or-3.0": true, "MIT-NoAd": true, "Prosperity-3.0.0": true,
}

// licenses states packages' licences as SPDX expressions and collects the
// texts of the non-SPDX ones they name.
type licenses struct {
	extracted map[string]string // LicenseRef-ID → text
	dirs      map[string]string // directory → its licence (binaries share modules)
}

// extractedInfo is an SPDX document's hasExtractedLicensingInfos entry.
type extractedInfo struct {
	LicenseID     string `json:"licenseId"`
	Name          string `json:"name"`
	ExtractedText string `json:"extractedText"`
}

func (l *licenses) infos() []extractedInfo {
	var out []extractedInfo
	for id, text := range l.extracted {
		out = append(out, extractedInfo{id, strings.TrimPrefix(id, "LicenseRef-"), text})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LicenseID < out[j].LicenseID })
	return out
}

// isLicenseFile says whether a file in a module's root states its licence:
// LICENSE, LICENCE, COPYING and their variants (LICENSE.md, LICENSE-MIT, ...),
// not Go source (license.go).
func isLicenseFile(name string) bool {
	n := strings.ToUpper(name)
	if strings.HasSuffix(n, ".GO") {
		return false
	}
	for _, base := range []string{"LICENSE", "LICENCE", "COPYING"} {
		if rest, ok := strings.CutPrefix(n, base); ok && (rest == "" || strings.ContainsAny(rest[:1], ".-_")) {
			return true
		}
	}
	return false
}

// dir is the licence of the Go module (or Go distribution) in dir, from the
// licence files in its root: the licences licensecheck recognises in them,
// joined with AND (several files may be alternatives, but that cannot be
// read from the files; AND claims no choice). NOASSERTION when there is no
// such file or one is not recognised well enough.
func (l *licenses) dir(dir string) (string, error) {
	if e, ok := l.dirs[dir]; ok {
		return e, nil
	}
	e, err := l.scanDir(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dir, err)
	}
	if l.dirs == nil {
		l.dirs = map[string]string{}
	}
	l.dirs[dir] = e
	return e, nil
}

func (l *licenses) scanDir(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return noAssertion, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the licence files: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if !e.Type().IsRegular() || !isLicenseFile(e.Name()) {
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", fmt.Errorf("reading the licence files: %w", err)
		}
		cov := licensecheck.Scan(text)
		if cov.Percent < minCoverage || len(cov.Match) == 0 {
			return noAssertion, nil
		}
		ids = append(ids, l.ids(text, cov)...)
	}
	return and(ids), nil
}

// text is the licence of a text (a Debian copyright file that is not in
// the machine-readable format): every licence licensecheck finds in it, at
// any coverage (such files are mostly prose around the licence notices).
func (l *licenses) text(text []byte) string {
	return and(l.ids(text, licensecheck.Scan(text)))
}

// ids are the SPDX identifiers of a scan's matches, a non-SPDX licence's
// recorded with its text.
func (l *licenses) ids(text []byte, cov licensecheck.Coverage) []string {
	var ids []string
	for _, m := range cov.Match {
		id := m.ID
		if nonSPDX[id] {
			id = "LicenseRef-" + id
			if l.extracted == nil {
				l.extracted = map[string]string{}
			}
			if _, ok := l.extracted[id]; !ok {
				l.extracted[id] = string(text[m.Start:m.End])
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// and joins licence expressions with AND, each once, in order;
// NOASSERTION for none.
func and(exprs []string) string {
	var out []string
	seen := map[string]bool{}
	for _, e := range exprs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return noAssertion
	}
	sort.Strings(out)
	for i, e := range out {
		if len(out) > 1 && strings.ContainsRune(e, ' ') {
			out[i] = "(" + e + ")"
		}
	}
	return strings.Join(out, " AND ")
}

// debianLicenses are SPDX identifiers of Debian's short licence names
// (the machine-readable copyright format's list and common others).
var debianLicenses = map[string]string{
	"GPL-1": "GPL-1.0-only", "GPL-1+": "GPL-1.0-or-later", "GPL-2": "GPL-2.0-only", "GPL-2+": "GPL-2.0-or-later",
	"GPL-3": "GPL-3.0-only", "GPL-3+": "GPL-3.0-or-later", "LGPL-2": "LGPL-2.0-only", "LGPL-2+": "LGPL-2.0-or-later",
	"LGPL-2.1": "LGPL-2.1-only", "LGPL-2.1+": "LGPL-2.1-or-later", "LGPL-3": "LGPL-3.0-only", "LGPL-3+": "LGPL-3.0-or-later",
	"AGPL-3": "AGPL-3.0-only", "AGPL-3+": "AGPL-3.0-or-later", "GFDL-1.2+": "GFDL-1.2-or-later", "GFDL-1.3+": "GFDL-1.3-or-later",
	"Apache-2.0": "Apache-2.0", "Artistic": "Artistic-1.0", "Artistic-2.0": "Artistic-2.0", "BSD-2-clause": "BSD-2-Clause",
	"BSD-3-clause": "BSD-3-Clause", "BSD-4-clause": "BSD-4-Clause", "Expat": "MIT", "MIT": "MIT", "ISC": "ISC",
	"Zlib": "Zlib", "MPL-1.1": "MPL-1.1", "MPL-2.0": "MPL-2.0", "CC0-1.0": "CC0-1.0", "0BSD": "0BSD",
	"BSL-1.0": "BSL-1.0", "X11": "X11", "OpenSSL": "OpenSSL", "Unicode-DFS-2016": "Unicode-DFS-2016",
}

// debianExceptions are SPDX identifiers of the exceptions Debian names
// "LICENSE with NAME exception".
var debianExceptions = map[string]string{
	"Bison": "Bison-exception-2.2", "Autoconf": "Autoconf-exception-3.0", "Font": "Font-exception-2.0",
	"GCC-3.1": "GCC-exception-3.1", "Classpath": "Classpath-exception-2.0",
}

// debianCopyright is the licence of a Debian package from its
// /usr/share/doc/PKG/copyright: the License fields of a machine-readable
// file (Format: …/copyright-format/1.0/) joined with AND, NOASSERTION if one
// names a licence SPDX does not know by that name; for an older free-form
// file, what licensecheck finds in it.
func (l *licenses) debianCopyright(text []byte) string {
	first, _, _ := bytes.Cut(text, []byte("\n"))
	if !bytes.HasPrefix(first, []byte("Format:")) || !bytes.Contains(first, []byte("copyright-format/1.0")) {
		return l.text(text)
	}
	var exprs []string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "License:")
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		e, ok := debianExpression(v)
		if !ok {
			return noAssertion
		}
		exprs = append(exprs, e)
	}
	return and(exprs)
}

// debianExpression is the SPDX expression of a copyright file's License
// field: short names joined by "or"/"and", each maybe "with X exception".
func debianExpression(field string) (string, bool) {
	words := strings.FieldsFunc(field, func(r rune) bool { return unicode.IsSpace(r) || r == ',' })
	var out []string
	for i := 0; i < len(words); i++ {
		switch w := words[i]; strings.ToLower(w) {
		case "or", "and":
			out = append(out, strings.ToUpper(w))
		case "with":
			// "with NAME exception"
			if i+2 >= len(words) || strings.ToLower(words[i+2]) != "exception" {
				return "", false
			}
			ex, ok := debianExceptions[words[i+1]]
			if !ok {
				return "", false
			}
			out = append(out, "WITH", ex)
			i += 2
		default:
			id, ok := debianLicenses[w]
			if !ok {
				return "", false
			}
			out = append(out, id)
		}
	}
	return strings.Join(out, " "), len(out) > 0
}
