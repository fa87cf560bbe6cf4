// Package names checks the names baton gives its buckets and prefixes:
// ASCII letters, digits, '-' and '_'. It uses no regular expression, whose
// compiling at start-up every baton process would pay.
package names

// Plain reports whether s is 1 to max letters, digits, '-' or '_' (max 0:
// no upper bound).
func Plain(s string, max int) bool {
	if len(s) == 0 || (max > 0 && len(s) > max) {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}
