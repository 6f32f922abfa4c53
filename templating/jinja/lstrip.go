package jinja

import (
	"sort"
	"strings"

	"github.com/nikolalohinski/gonja/v2/tokens"
)

// fixLStrip rewrites a source so that gonja's whitespace control matches
// Jinja's (trim_blocks and lstrip_blocks on). It only adds or removes
// whitespace-control characters and blanks, never line breaks, so line numbers
// in errors stay right.
//
//   - gonja's lstrip_blocks strips whitespace before a block or comment tag
//     even when that whitespace does not start a line ("{{ a }} {% if b %}"
//     loses its space). Jinja strips only whitespace that follows a newline
//     or the start of the template. Where gonja would strip wrongly, mark the
//     tag with "+" (lstrip disabled), which is exactly what Jinja does there.
//   - Jinja does not apply trim_blocks to `{% raw %}` (the newline after it is
//     kept): mark it "+%}".
//   - Jinja applies lstrip_blocks to `{% endraw %}`, gonja does not: remove the
//     blanks between the last newline of the raw text and the tag.
//   - gonja ignores "{% raw -%}" and "{%- endraw %}" (Jinja strips all the
//     whitespace at that end of the raw text): reported in the returned map,
//     keyed by the raw text's offset in the rewritten source, for prepare.
//   - gonja fails on an empty raw block: it becomes an empty comment with the
//     same whitespace control.
//
// Lexing checks every token with check (see tokenCheck); its error is returned.
func fixLStrip(src string, check func(*tokens.Token) error) (string, map[int]rawTrim, error) {
	type edit struct {
		at, del int
		ins     string
	}
	var edits []edit
	type rawBlock struct {
		begin        *tokens.Token
		contentStart int // in src
		endBlanks    int // deleted before endraw
		trim         rawTrim
	}
	var raws []rawBlock
	var raw *rawBlock // the raw block being lexed
	s, err := tokens.LexChecked(src, pavConfig, check)
	if err != nil {
		return "", nil, err
	}
	var prev, blockBegin *tokens.Token
	inRawBegin := false
	for !s.End() {
		tok := s.Next()
		switch tok.Type {
		case tokens.BlockBegin:
			blockBegin = tok
		case tokens.Name:
			if blockBegin != nil && (prev == blockBegin || prev.Type == tokens.Whitespace) {
				switch tok.Val {
				case "raw":
					inRawBegin = true
					raw = &rawBlock{begin: blockBegin}
				case "endraw":
					if raw != nil {
						raw.trim.right = strings.HasPrefix(blockBegin.Val, "{%-")
					}
					if len(blockBegin.Val) == 2 {
						if n := blanksAfterNewline(src, blockBegin.Pos); n > 0 {
							edits = append(edits, edit{at: blockBegin.Pos - n, del: n})
							if raw != nil {
								raw.endBlanks = n
							}
						}
					}
				}
			}
		case tokens.BlockEnd:
			if inRawBegin {
				raw.trim.left = strings.HasPrefix(tok.Val, "-")
				raw.contentStart = tok.Pos + len(tok.Val)
				// after the newline gonja trims
				if strings.HasPrefix(src[raw.contentStart:], "\r\n") {
					raw.contentStart += 2
				} else if strings.HasPrefix(src[raw.contentStart:], "\n") {
					raw.contentStart++
				}
				if strings.HasPrefix(tok.Val, "%}") {
					edits = append(edits, edit{at: tok.Pos, ins: "+"})
					raw.contentStart = tok.Pos + 2 // the "+" keeps the newline
				}
			} else if raw != nil && blockBegin != nil && blockBegin.Pos > raw.begin.Pos {
				// endraw's end
				if blockBegin.Pos-raw.endBlanks <= raw.contentStart {
					start, end := raw.begin.Pos, tok.Pos+strings.Index(tok.Val, "%}")+2
					open := ""
					if c := src[start+2]; c == '-' || c == '+' {
						open = string(c)
					}
					kept := edits[:0]
					for _, e := range edits {
						if e.at >= start && e.at < end {
							if e.at == start+2 && e.ins == "+" {
								open = "+"
							}
							continue
						}
						kept = append(kept, e)
					}
					edits = kept
					closing := ""
					if c := tok.Val[0]; c == '-' || c == '+' {
						closing = string(c)
					}
					edits = append(edits, edit{at: start, del: end - start, ins: "{#" + open + " " + closing + "#}"})
				} else {
					raws = append(raws, *raw)
				}
				raw = nil
			}
			inRawBegin = false
			blockBegin = nil
		}
		if (tok.Type == tokens.BlockBegin || tok.Type == tokens.CommentBegin) && len(tok.Val) == 2 && prev != nil {
			switch prev.Type {
			case tokens.VariableEnd, tokens.BlockEnd, tokens.CommentEnd:
				end := prev.Pos + len(prev.Val)
				if end < tok.Pos && tok.Pos <= len(src) && !strings.HasSuffix(prev.Val, "\n") {
					gap := src[end:tok.Pos]
					if strings.Trim(gap, " \t") == "" {
						edits = append(edits, edit{at: tok.Pos + 2, ins: "+"})
					}
				}
			}
		}
		prev = tok
	}
	sort.SliceStable(edits, func(i, j int) bool { return edits[i].at < edits[j].at })
	var trims map[int]rawTrim
	for _, r := range raws {
		if !(r.trim.left || r.trim.right) {
			continue
		}
		pos := r.contentStart
		for _, e := range edits {
			if e.at < r.contentStart {
				pos += len(e.ins) - e.del
			}
		}
		if trims == nil {
			trims = map[int]rawTrim{}
		}
		trims[pos] = r.trim
	}
	if len(edits) == 0 {
		return src, trims, nil
	}
	var b strings.Builder
	last := 0
	for _, e := range edits {
		if e.at < last || e.at+e.del > len(src) {
			continue
		}
		b.WriteString(src[last:e.at])
		b.WriteString(e.ins)
		last = e.at + e.del
	}
	b.WriteString(src[last:])
	return b.String(), trims, nil
}

// rawTrim says at which ends Jinja strips all whitespace of a raw block's text.
type rawTrim struct{ left, right bool }

// blanksAfterNewline returns how many spaces and tabs precede pos in src if
// a newline precedes them, else 0.
func blanksAfterNewline(src string, pos int) int {
	if pos > len(src) {
		return 0
	}
	i := pos
	for i > 0 && (src[i-1] == ' ' || src[i-1] == '\t') {
		i--
	}
	if i == 0 || src[i-1] != '\n' {
		return 0
	}
	return pos - i
}
