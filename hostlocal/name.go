package hostlocal

import "fmt"

// maxNameLen is the longest gate, pid-file or group name.
const maxNameLen = 200

// validName checks that name is 1-200 characters of A-Z a-z 0-9 - _ = .
// not starting with a dot (which also rules out "." and ".."); what says
// which kind of name it is. The error wraps ErrInvalidName and states the
// rule.
func validName(what, name string) error {
	ok := len(name) > 0 && len(name) <= maxNameLen && name[0] != '.'
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '=' || c == '.'
	}
	if !ok {
		return fmt.Errorf("%w: %s name %q: use 1-%d characters of A-Z a-z 0-9 - _ = . not starting with a dot",
			ErrInvalidName, what, name, maxNameLen)
	}
	return nil
}
