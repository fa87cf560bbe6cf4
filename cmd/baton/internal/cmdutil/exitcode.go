package cmdutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
	"github.com/batonhq/baton/view"
)

// ExitCode is a process exit code of the contract.
type ExitCode int

// The exit codes of every verb (docs/CONTRACT.md).
const (
	ExitOK          ExitCode = 0
	ExitFailure     ExitCode = 1
	ExitUsage       ExitCode = 2
	ExitConflict    ExitCode = 3
	ExitCrossHost   ExitCode = 4
	ExitNotFound    ExitCode = 5
	ExitUnavailable ExitCode = 6
	ExitProblems    ExitCode = 7
)

// ErrUsage marks bad input: an unknown flag, a missing argument, a value
// that breaks a rule.
var ErrUsage = errors.New("bad input")

// Usagef returns a usage error; the message should say the rule.
func Usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// ExitError ends a command with a given code. Err may be nil for a quiet
// exit (the command has already said what happened).
type ExitError struct {
	Code ExitCode
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// Exit returns an error that ends the command with code.
func Exit(code ExitCode, err error) error { return &ExitError{Code: code, Err: err} }

// waitMore is how a hint tells to wait for a held slot: with --wait DUR,
// or a longer one than the join waited.
func waitMore(held *session.HeldError) string {
	if held.Waited > 0 {
		return "pass a longer --wait to wait in line"
	}
	return "pass --wait DUR to wait in line"
}

// Code maps an error to its exit code. This is the one place that does so.
func Code(err error) ExitCode {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, ErrUsage), errors.Is(err, session.ErrInvalid), errors.Is(err, kv.ErrInvalidKey),
		errors.Is(err, kv.ErrInvalidTTL), errors.Is(err, kv.ErrInvalidConfig), errors.Is(err, hostlocal.ErrInvalidName),
		errors.Is(err, hostlocal.ErrStateDir), errors.Is(err, lease.ErrInvalid), errors.Is(err, queue.ErrInvalid),
		errors.Is(err, view.ErrInvalid), errors.Is(err, view.ErrUnsafeListen),
		errors.Is(err, queue.ErrStartFailed), errors.Is(err, sem.ErrInvalid), errors.Is(err, rate.ErrInvalid), errors.Is(err, reserve.ErrInvalid):
		return ExitUsage
	case errors.Is(err, session.ErrForeignHost):
		return ExitCrossHost
	case errors.Is(err, session.ErrHeld), errors.Is(err, session.ErrUndecodable), errors.Is(err, session.ErrGateBusy),
		errors.Is(err, session.ErrLost), errors.Is(err, kv.ErrConflict), errors.Is(err, hostlocal.ErrLocked),
		errors.Is(err, lease.ErrHeld), errors.Is(err, lease.ErrUndecodable), errors.Is(err, lease.ErrLost),
		errors.Is(err, lease.ErrNotEligible), errors.Is(err, queue.ErrQueueExists), errors.Is(err, queue.ErrState), errors.Is(err, queue.ErrScheduleExists),
		errors.Is(err, queue.ErrHeld), errors.Is(err, queue.ErrUndecodable),
		errors.Is(err, sem.ErrExists), errors.Is(err, sem.ErrFull), errors.Is(err, sem.ErrLost), errors.Is(err, sem.ErrUndecodable),
		errors.Is(err, rate.ErrExists), errors.Is(err, rate.ErrLimited), errors.Is(err, rate.ErrUndecodable),
		errors.Is(err, reserve.ErrHeld), errors.Is(err, reserve.ErrLost), errors.Is(err, reserve.ErrUndecodable), errors.Is(err, reserve.ErrSpaceFull):
		return ExitConflict
	case errors.Is(err, session.ErrNotFound), errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrNoLeader),
		errors.Is(err, lease.ErrNoCandidate), errors.Is(err, queue.ErrQueueNotFound), errors.Is(err, queue.ErrTaskNotFound), errors.Is(err, queue.ErrScheduleNotFound),
		errors.Is(err, queue.ErrNoTask), errors.Is(err, sem.ErrNotFound), errors.Is(err, sem.ErrNoPermit),
		errors.Is(err, rate.ErrNotFound), errors.Is(err, rate.ErrNoTake), errors.Is(err, reserve.ErrNoReservation):
		return ExitNotFound
	case errors.Is(err, kv.ErrUnavailable), errors.Is(err, kv.ErrPermission), errors.Is(err, kv.ErrJetStreamDisabled),
		errors.Is(err, kv.ErrBucketNotFound), errors.Is(err, kv.ErrBucketMismatch), errors.Is(err, kv.ErrStorageFull):
		return ExitUnavailable
	default:
		return ExitFailure
	}
}

// Hint says what to do about an error, for the second half of the one-line
// message; empty when the error says it already.
func Hint(err error) string {
	var held *session.HeldError
	switch {
	case errors.As(err, &held) && errors.Is(err, session.ErrForeignHost):
		return fmt.Sprintf("only host %s can renew or close it; %s for it to be closed or to expire (TTL %s)", held.Holder.Host, waitMore(held), held.Holder.TTL)
	case errors.As(err, &held) && errors.Is(err, session.ErrUndecodable):
		return "run `baton doctor` to inspect it; `baton doctor --fix` removes it"
	case errors.As(err, &held) && errors.Is(err, session.ErrHeld):
		return fmt.Sprintf("%s for it to be closed or to expire (TTL %s), or pass --force to replace it", waitMore(held), held.Holder.TTL)
	case errors.Is(err, lease.ErrHeld):
		return "wait for it (--wait DUR), or act as its holder with --instance ID"
	case errors.Is(err, lease.ErrUndecodable):
		return "run `baton doctor` to inspect it; `baton doctor --fix` removes it once stale"
	case errors.Is(err, lease.ErrLost):
		return "acquire it again to go on"
	case errors.Is(err, lease.ErrNoCandidate):
		return "see the candidates with `baton leader KEY`"
	case errors.Is(err, lease.ErrNoLeader), errors.Is(err, lease.ErrNotFound):
		return "nothing holds it now"
	case errors.Is(err, sem.ErrLost):
		return "acquire a permit again to go on"
	case errors.Is(err, sem.ErrUndecodable):
		return "run `baton doctor` to inspect it"
	case errors.Is(err, reserve.ErrHeld):
		return "wait in line for them (--wait DUR), or ask the holder to release them; `baton reserve ls SPACE` shows every reservation"
	case errors.Is(err, reserve.ErrLost):
		return "reserve the paths again to go on"
	case errors.Is(err, reserve.ErrUndecodable):
		return "run `baton doctor` to inspect it"
	case errors.Is(err, queue.ErrQueueNotFound):
		return "create it with `baton queue create QUEUE`; `baton queue ls` lists the queues"
	case errors.Is(err, queue.ErrQueueExists):
		return "change its settings with `baton queue config QUEUE --max-active N ...`"
	case errors.Is(err, queue.ErrScheduleExists):
		return "remove it first (`baton queue schedule rm QUEUE NAME`), or add it under another name"
	case errors.Is(err, queue.ErrScheduleNotFound):
		return "`baton queue schedule ls QUEUE` lists the queue's schedules"
	case errors.Is(err, queue.ErrTaskNotFound):
		return "`baton queue status QUEUE` shows what the queue holds; finished tasks go after the queue's retention"
	case errors.Is(err, queue.ErrHeld):
		return "wait for its task to end, or pass --force to stop that task and put it back to pending"
	case errors.Is(err, queue.ErrNoTask):
		return "the queue had nothing to run; pass a longer --wait to wait for a task"
	case errors.Is(err, queue.ErrUndecodable):
		return "run `baton doctor` to inspect it"
	case errors.Is(err, queue.ErrStartFailed):
		return "check that the command exists and can be executed"
	case errors.Is(err, session.ErrGateBusy):
		return "another baton on this host is joining the slot; retry, or pass --wait DUR"
	case errors.Is(err, session.ErrLost):
		return "stop working on the slot; join it again to continue"
	case errors.Is(err, session.ErrNotFound):
		return "join it first: baton join SLOT --task ID"
	case errors.Is(err, kv.ErrStorageFull):
		return "the server's disk is full, or its (or the account's) JetStream storage limit is reached: free space on the disk that holds its store (`baton up --store DIR`), or raise the limit; writes resume once there is room, without a restart of the server"
	case errors.Is(err, kv.ErrBucketNotFound):
		return "run `baton up` to start a server with its buckets, or `baton doctor --fix` to create them on this server"
	case errors.Is(err, kv.ErrBucketMismatch):
		return "run `baton doctor` to see the differences; `baton doctor --fix` applies baton's settings"
	case errors.Is(err, ErrNoCredentials):
		return "pass --user and --password, --token, --nkey SEED-FILE, --creds FILE or --context NAME (or NATS_USER and NATS_PASSWORD, NATS_TOKEN, NATS_NKEY, NATS_CREDS)"
	case errors.Is(err, kv.ErrPermission) && errors.Is(err, nats.ErrPermissionViolation):
		return "this user's permissions on the server do not cover it: pass the --prefix (and --inbox-prefix) they name, or have them extended"
	case errors.Is(err, kv.ErrPermission):
		return "check the credentials (--creds, --nkey, --user/--password, --token, --context) and the account's permissions"
	case errors.As(err, new(x509.UnknownAuthorityError)), errors.As(err, new(*tls.CertificateVerificationError)):
		return "pass --tls-ca FILE (or NATS_CA) naming the CA that signed the server's certificate"
	case errors.As(err, new(x509.HostnameError)):
		return "the server's certificate does not name the host of the URL; pass --server with a host or address it names"
	case errors.Is(err, nats.ErrTLS), remoteTLSAlert(err):
		return "if the server wants a client certificate, pass --tls-cert and --tls-key (or NATS_CERT and NATS_KEY) of one its CA signed"
	case JetStreamOffForAccount(err):
		return "the user's account has no JetStream: give it `jetstream: enabled` in the server's accounts block"
	case errors.Is(err, kv.ErrJetStreamDisabled):
		return "enable JetStream on the server, or run `baton up`"
	case errors.Is(err, syscall.EADDRINUSE):
		return "another server listens there; stop it or pass --listen HOST:PORT"
	case errors.Is(err, kv.ErrUnavailable):
		return "is `baton up` running? pass --server URL (or BATON_URL) to use another server"
	case errors.Is(err, hostlocal.ErrStateDir):
		return "pass --state-dir DIR (or BATON_STATE_DIR) naming a directory of yours on a local disk"
	case errors.Is(err, ErrUsage), errors.Is(err, session.ErrInvalid), errors.Is(err, kv.ErrInvalidKey),
		errors.Is(err, kv.ErrInvalidTTL), errors.Is(err, kv.ErrInvalidConfig), errors.Is(err, queue.ErrInvalid):
		return "see --help"
	case errors.Is(err, context.Canceled):
		return "interrupted"
	}
	return ""
}

// remoteTLSAlert reports a TLS alert the server sent, such as
// "certificate required" to a client without a certificate.
func remoteTLSAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" && op.Err != nil && strings.HasPrefix(op.Err.Error(), "tls: ")
}

// JetStreamOffForAccount reports a server that runs JetStream but not for
// the user's account, which waiting does not change.
func JetStreamOffForAccount(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeJetStreamNotEnabledForAccount
}

// Message is the one-line error of the contract:
// "baton: <verb>: <what happened>; <what to do>".
func Message(verb string, err error) string { // verb "" for the root's own errors
	what := strings.TrimSpace(trimPrefixes(err.Error()))
	if hint := Hint(err); hint != "" {
		what += "; " + hint
	}
	if verb == "" {
		return strings.ReplaceAll("baton: "+what, "\n", " ")
	}
	return strings.ReplaceAll(fmt.Sprintf("baton: %s: %s", verb, what), "\n", " ")
}

// Text is an error's message without package prefixes, for output that
// is not an error line.
func Text(err error) string { return trimPrefixes(err.Error()) }

// packagePrefix matches the package prefixes that sentinel messages carry
// ("kv: ", "session: "), at the start of the message or of a wrapped part.
// It is compiled at the first error, not at start-up.
var packagePrefix = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(^|: )(?:kv|session|lease|queue|sem|rate|reserve|pattern|hostlocal|natsctx|bad input): `)
})

// trimPrefixes drops the package prefixes, which mean nothing to a user.
func trimPrefixes(s string) string {
	for {
		t := packagePrefix().ReplaceAllString(s, "$1")
		if t == s {
			return s
		}
		s = t
	}
}
