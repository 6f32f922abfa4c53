package tokens

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// pyUnescape decodes the escapes of a string literal's body as Jinja does
// (PaV): Python's "unicode-escape" codec after "backslashreplace", so
// \\ \' \" \a \b \f \n \r \t \v, octal \ooo, \xhh, \uhhhh and \Uhhhhhhhh are
// decoded, a backslash before a line break removes both, and a backslash
// before any other character stays (`'\d'` is two characters).
func pyUnescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			i++
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf(`\ at end of string`)
		}
		c := s[i+1]
		i += 2
		switch c {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(c)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i - 1
			for i < len(s) && i < j+3 && s[i] >= '0' && s[i] <= '7' {
				i++
			}
			n, _ := strconv.ParseUint(s[j:i], 8, 32)
			b.WriteRune(rune(n))
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+width > len(s) || !isHex(s[i:i+width]) {
				return "", fmt.Errorf(`truncated \%cXX escape`, c)
			}
			n, _ := strconv.ParseUint(s[i:i+width], 16, 32)
			if n > utf8.MaxRune {
				return "", fmt.Errorf(`illegal Unicode character`)
			}
			b.WriteRune(rune(n))
			i += width
		default:
			b.WriteByte('\\')
			if c >= utf8.RuneSelf {
				// backslashreplace made the character an escape, which
				// the codec then reads after the kept backslash
				r, size := utf8.DecodeRuneInString(s[i-1:])
				i += size - 1
				switch {
				case r < 0x100:
					fmt.Fprintf(&b, `x%02x`, r)
				case r < 0x10000:
					fmt.Fprintf(&b, `u%04x`, r)
				default:
					fmt.Fprintf(&b, `U%08x`, r)
				}
				continue
			}
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789abcdefABCDEF", rune(s[i])) {
			return false
		}
	}
	return true
}
