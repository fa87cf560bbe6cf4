package hostlocal

import (
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxHostIDLen is the longest host id: the longest DNS name.
const maxHostIDLen = 253

// HostID returns the id of this host: override, trimmed of surrounding
// space, when it is not empty (the --host-id flag or BATON_HOST_ID), else
// os.Hostname(). An override with space inside, longer than 253 bytes or
// not valid UTF-8 (records are JSON, which would not give it back as it
// was) returns an error wrapping ErrInvalidName, as does an empty hostname.
func HostID(override string) (string, error) {
	if id := strings.TrimSpace(override); id != "" {
		if len(id) > maxHostIDLen {
			return "", fmt.Errorf("%w: host id %q is longer than %d bytes", ErrInvalidName, id, maxHostIDLen)
		}
		if strings.IndexFunc(id, unicode.IsSpace) >= 0 {
			return "", fmt.Errorf("%w: host id %q contains white space", ErrInvalidName, id)
		}
		if !utf8.ValidString(id) {
			return "", fmt.Errorf("%w: host id %q is not valid UTF-8", ErrInvalidName, id)
		}
		return id, nil
	}
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("hostlocal: host id: %w", err)
	}
	if name == "" {
		return "", fmt.Errorf("%w: the hostname is empty; set a host id", ErrInvalidName)
	}
	return name, nil
}
