package kv

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotFound means the key has no live value: it never existed, was
	// deleted, or expired. Get and Latest return it.
	ErrNotFound = errors.New("kv: key not found")

	// ErrConflict means a compare-and-set lost: the key's last revision was
	// not the expected one. It is returned wrapped in a *ConflictError that
	// carries what the stream leader holds now.
	ErrConflict = errors.New("kv: revision conflict")

	// ErrBucketNotFound means the bucket does not exist on the server.
	ErrBucketNotFound = errors.New("kv: bucket not found")

	// ErrBucketMismatch means a bucket exists with settings other than the
	// expected ones. It is returned wrapped in a *MismatchError.
	ErrBucketMismatch = errors.New("kv: bucket settings differ")

	// ErrUnavailable means the server could not be reached or did not
	// answer in time.
	ErrUnavailable = errors.New("kv: server unavailable")

	// ErrStorageFull means the server refused a write for lack of room to
	// store it: its disk is full, or its JetStream storage limit (by default
	// a share of the disk) or the account's is reached. The write was not
	// applied, and reads still work. Writes succeed again once there is
	// room: `baton up` restarts its JetStream on its own once its disk has
	// room again (adr/0034).
	ErrStorageFull = errors.New("kv: the server's storage is full")

	// ErrJetStreamDisabled means the server answers but has JetStream off
	// for this account.
	ErrJetStreamDisabled = errors.New("kv: JetStream is not enabled")

	// ErrPermission means the server refused the connection (credentials)
	// or an operation (the user's permissions do not cover its subject, or
	// the reply inbox). A refused operation fails as soon as the server says
	// so, not at the timeout, and a refused write was not applied.
	ErrPermission = errors.New("kv: permission denied")

	// ErrInvalidKey means a key is not a valid key name.
	ErrInvalidKey = errors.New("kv: invalid key")

	// ErrInvalidTTL means a TTL is not a whole number of seconds of at least
	// one second.
	ErrInvalidTTL = errors.New("kv: invalid TTL")

	// ErrInvalidConfig means an option or bucket setting is not usable.
	ErrInvalidConfig = errors.New("kv: invalid configuration")

	// ErrTooLarge means a value is larger than the server accepts in one
	// message (its max_payload). It is returned beside ErrInvalidConfig.
	ErrTooLarge = errors.New("kv: value too large")

	// ErrHandOff means a server still leads a bucket's stream that HandOff
	// was to move: no other server holds a current copy of it, or none
	// answered as its leader before the context ended (the error then
	// wraps the context's error too).
	ErrHandOff = errors.New("kv: not handed off")
)

// ConflictError reports a lost compare-and-set.
type ConflictError struct {
	Key string
	// Expected is the revision the write required (0: the key was expected
	// to have no live value).
	Expected uint64
	// Current is the key's latest entry as the stream leader holds it after
	// the conflict (possibly a tombstone), or nil if the key has no message
	// at all.
	Current *Entry
	// Err is the server's answer, when there was one.
	Err error
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kv: revision conflict on %q: expected revision %d", e.Key, e.Expected)
	if e.Current != nil {
		fmt.Fprintf(&b, ", found %s at revision %d", e.Current.Op, e.Current.Revision)
	} else {
		b.WriteString(", found no entry")
	}
	return b.String()
}

// Unwrap lets errors.Is match ErrConflict and the server's error.
func (e *ConflictError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrConflict}
	}
	return []error{ErrConflict, e.Err}
}

// MismatchError lists how an existing bucket differs from the expected
// settings.
type MismatchError struct {
	Bucket      string
	Differences []Difference
}

// Difference is one setting of a bucket that differs from what is expected.
type Difference struct {
	Setting string
	Have    string
	Want    string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s is %s, want %s", d.Setting, d.Have, d.Want)
}

func (e *MismatchError) Error() string {
	parts := make([]string, len(e.Differences))
	for i, d := range e.Differences {
		parts[i] = d.String()
	}
	return fmt.Sprintf("kv: bucket %s: %s", e.Bucket, strings.Join(parts, "; "))
}

// Unwrap lets errors.Is match ErrBucketMismatch.
func (e *MismatchError) Unwrap() error { return ErrBucketMismatch }
