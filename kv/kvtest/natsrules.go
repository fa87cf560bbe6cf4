package kvtest

import (
	"regexp"
	"strings"
)

// The name rules nats.go's jetstream package applies before it sends a
// request (jetstream/kv.go of nats.go v1.55.0, keyValid and validBucketRe),
// copied here as the oracle that baton's own validators are tested
// against. TestNATSRulesAgreeWithJetStream checks the copy against the
// library itself.
var (
	natsKeyRE    = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)
	natsBucketRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// NATSKeyValid reports whether jetstream accepts key as a KV key: at least
// one of - / _ = . a-z A-Z 0-9, with no leading or trailing '.' and no "..".
// It sets no length limit.
func NATSKeyValid(key string) bool {
	if len(key) == 0 || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	return natsKeyRE.MatchString(key)
}

// NATSBucketValid reports whether jetstream accepts name as a KV bucket
// name: at least one of a-z A-Z 0-9 _ -.
func NATSBucketValid(name string) bool { return natsBucketRE.MatchString(name) }
