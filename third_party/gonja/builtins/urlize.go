package builtins

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/utils"
)

// PaV: urlize as Jinja 3.1's (jinja2.utils.urlize and do_urlize under the
// sandbox's default policies): the text is escaped first, then each word
// between blanks becomes a link when it is one, with its leading and
// trailing punctuation kept out. Python's \w and \d are Unicode's.
var (
	urlizeHTTP = regexp.MustCompile(`(?i)^(?:(?:https?://|www\.)(?:(?:[\p{L}\p{N}_%-]+\.)+)?(?:[a-z]{2,63}|xn--[\p{L}\p{N}_%]{2,59})` +
		`|(?:[\p{L}\p{N}_%-]{2,63}\.)+(?:com|net|int|edu|gov|org|info|mil)` +
		`|https?://(?:\p{Nd}{1,3}(?:\.\p{Nd}{1,3}){3}|\[(?:[\p{Nd}a-f]{0,4}:){2}(?:[\p{Nd}a-f]{0,4}:?){1,6}\]))` +
		`(?::\p{Nd}{1,5})?(?:[/?#]\S*)?$`)
	urlizeEmail     = regexp.MustCompile(`^\S+@[\p{L}\p{N}_][\p{L}\p{N}_.-]*\.[\p{L}\p{N}_]+$`)
	urlizeLead      = regexp.MustCompile(`^(?:[(<]|&lt;)+`)
	urlizeTrail     = regexp.MustCompile(`(?:[)>.,\n]|&gt;)+$`)
	urlizeURIScheme = regexp.MustCompile(`^[\p{L}\p{N}_.+-]{2,}:/{0,2}$`)
)

type urlizeOpts struct {
	trim         func(string) string
	attrs        string // rel and target
	extraSchemes []string
}

func urlizeOptions(trimURLLimit *exec.Value, nofollow bool, target, rel, extraSchemes *exec.Value) (urlizeOpts, error) {
	opts := urlizeOpts{trim: func(s string) string { return s }}
	switch {
	case trimURLLimit.IsInteger():
		limit := trimURLLimit.Integer()
		opts.trim = func(s string) string {
			runes := []rune(s)
			if len(runes) <= limit {
				return s
			}
			if limit < 0 { // Python's slice from the end
				limit = max(len(runes)+limit, 0)
			}
			return string(runes[:limit]) + "..."
		}
	case !trimURLLimit.IsNil():
		return opts, fmt.Errorf("urlize: trim_url_limit must be an integer, not %s", exec.TypeName(trimURLLimit))
	}
	relParts := map[string]bool{"noopener": true} // the sandbox's policy urlize.rel
	if nofollow {
		relParts["nofollow"] = true
	}
	if rel.IsTrue() {
		if !rel.IsString() {
			return opts, fmt.Errorf("urlize: rel must be a string, not %s", exec.TypeName(rel))
		}
		for _, part := range strings.FieldsFunc(rel.String(), isPySpace) {
			relParts[part] = true
		}
	}
	sorted := make([]string, 0, len(relParts))
	for part := range relParts {
		sorted = append(sorted, part)
	}
	sort.Strings(sorted)
	opts.attrs = ` rel="` + utils.Escape(strings.Join(sorted, " ")) + `"`
	if target.IsTrue() {
		opts.attrs += ` target="` + utils.Escape(softStr(target)) + `"`
	}
	if extraSchemes.IsNil() {
		return opts, nil
	}
	if !extraSchemes.IsIterable() {
		return opts, fmt.Errorf("urlize: '%s' object is not iterable", exec.TypeName(extraSchemes))
	}
	var err error
	extraSchemes.Iterate(func(_, _ int, scheme, _ *exec.Value) bool {
		if !scheme.IsString() || !urlizeURIScheme.MatchString(scheme.String()) {
			err = fmt.Errorf("%s is not a valid URI scheme prefix.", exec.PyRepr(scheme))
			return false
		}
		opts.extraSchemes = append(opts.extraSchemes, scheme.String())
		return true
	}, func() {})
	return opts, err
}

// isPySpace is Python's str.isspace of one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}

// jinjaUrlize links the URLs and addresses of escaped text.
func jinjaUrlize(text string, opts urlizeOpts) string {
	var out strings.Builder
	for len(text) > 0 {
		// a run of blanks or of anything else
		first, _ := utf8.DecodeRuneInString(text)
		blank := isPySpace(first)
		end := strings.IndexFunc(text, func(r rune) bool { return isPySpace(r) != blank })
		if end < 0 {
			end = len(text)
		}
		word := text[:end]
		text = text[end:]
		if blank {
			out.WriteString(word)
			continue
		}
		out.WriteString(urlizeWord(word, opts))
	}
	return out.String()
}

func urlizeWord(word string, opts urlizeOpts) string {
	head, middle, tail := "", word, ""
	if m := urlizeLead.FindString(middle); m != "" {
		head, middle = m, middle[len(m):]
	}
	if loc := urlizeTrail.FindStringIndex(middle); loc != nil {
		middle, tail = middle[:loc[0]], middle[loc[0]:]
	}
	// balance brackets with what the tail holds
	for _, pair := range [][2]string{{"(", ")"}, {"<", ">"}, {"&lt;", "&gt;"}} {
		open, closing := strings.Count(middle, pair[0]), strings.Count(middle, pair[1])
		if open <= closing {
			continue
		}
		for n := min(open, strings.Count(tail, pair[1])); n > 0; n-- {
			end := strings.Index(tail, pair[1]) + len(pair[1])
			middle, tail = middle+tail[:end], tail[end:]
		}
	}
	switch {
	case urlizeHTTP.MatchString(middle):
		href := middle
		if !strings.HasPrefix(middle, "https://") && !strings.HasPrefix(middle, "http://") {
			href = "https://" + middle
		}
		middle = `<a href="` + href + `"` + opts.attrs + `>` + opts.trim(middle) + `</a>`
	case strings.HasPrefix(middle, "mailto:") && urlizeEmail.MatchString(middle[len("mailto:"):]):
		middle = `<a href="` + middle + `">` + middle[len("mailto:"):] + `</a>`
	case strings.Contains(middle, "@") && !strings.HasPrefix(middle, "www.") && !strings.HasPrefix(middle, "@") &&
		!strings.Contains(middle, ":") && urlizeEmail.MatchString(middle):
		middle = `<a href="mailto:` + middle + `">` + middle + `</a>`
	default:
		for _, scheme := range opts.extraSchemes {
			if middle != scheme && strings.HasPrefix(middle, scheme) {
				middle = `<a href="` + middle + `"` + opts.attrs + `>` + middle + `</a>`
			}
		}
	}
	return head + middle + tail
}
