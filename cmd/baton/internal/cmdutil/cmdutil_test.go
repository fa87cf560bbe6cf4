package cmdutil

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/internal/natsctx"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/session"
)

func TestCode_MapsEveryErrorToTheContractsExitCode(t *testing.T) {
	held := &session.HeldError{Slot: "s", Holder: &session.Session{}, Reason: session.ErrHeld}
	foreign := &session.HeldError{Slot: "s", Holder: &session.Session{}, Reason: session.ErrForeignHost}
	for _, tc := range []struct {
		err  error
		want ExitCode
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{Usagef("bad"), ExitUsage},
		{fmt.Errorf("x: %w", session.ErrInvalid), ExitUsage},
		{fmt.Errorf("x: %w", kv.ErrInvalidKey), ExitUsage},
		{fmt.Errorf("x: %w", kv.ErrInvalidConfig), ExitUsage},
		{held, ExitConflict},
		{fmt.Errorf("x: %w", foreign), ExitCrossHost},
		{&session.HeldError{Slot: "s", Reason: session.ErrUndecodable}, ExitConflict},
		{fmt.Errorf("%w: %w", session.ErrGateBusy, hostlocal.ErrLocked), ExitConflict},
		{&session.LostError{Slot: "s", How: session.LostExpired}, ExitConflict},
		{&kv.ConflictError{Key: "s"}, ExitConflict},
		{fmt.Errorf("%w: s", session.ErrNotFound), ExitNotFound},
		{fmt.Errorf("%w: down", kv.ErrUnavailable), ExitUnavailable},
		{fmt.Errorf("%w: no", kv.ErrPermission), ExitUnavailable},
		{fmt.Errorf("%w: off", kv.ErrJetStreamDisabled), ExitUnavailable},
		{fmt.Errorf("%w: gone", kv.ErrBucketNotFound), ExitUnavailable},
		{fmt.Errorf("%w: refused", kv.ErrStorageFull), ExitUnavailable},
		{Exit(ExitProblems, nil), ExitProblems},
		{Exit(ExitCode(42), errors.New("child")), ExitCode(42)},
	} {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestMessage_IsOneLineWithWhatToDo(t *testing.T) {
	err := fmt.Errorf("%w: cannot reach nats://127.0.0.1:1:\nnats: no servers", kv.ErrUnavailable)
	got := Message("join", err)
	if strings.Contains(got, "\n") || !strings.HasPrefix(got, "baton: join: server unavailable: cannot reach") ||
		!strings.Contains(got, "; is `baton up` running?") {
		t.Errorf("Message = %q", got)
	}
	// Package prefixes go, words that merely look like them stay.
	got = Message("close", fmt.Errorf("%w: slot s has no session: nothing", session.ErrNotFound))
	if got != "baton: close: no such session: slot s has no session: nothing; join it first: baton join SLOT --task ID" {
		t.Errorf("Message = %q", got)
	}
	// So does natsctx's, inside kv's (a context that cannot be read).
	got = Message("join", fmt.Errorf("%w: nats context %q: %w: /h/dev.json does not exist", kv.ErrInvalidConfig, "dev", natsctx.ErrNotFound))
	if got != `baton: join: invalid configuration: nats context "dev": no such context: /h/dev.json does not exist; see --help` {
		t.Errorf("Message = %q", got)
	}
}

func TestConfig_FlagsBeatEnvironment(t *testing.T) {
	env := map[string]string{
		"BATON_URL": "nats://from-baton-url:4222", "NATS_URL": "nats://from-nats-url:4222",
		"BATON_HOST_ID": "env-host", "BATON_TIMEOUT": "9s", "BATON_PREFIX": "envp",
		"BATON_INBOX_PREFIX": "_INBOX_env",
	}
	getenv := func(k string) string { return env[k] }

	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.Register(fs)
	if err := fs.Parse([]string{"--host-id", "flag-host"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Resolve(getenv); err != nil {
		t.Fatal(err)
	}
	if c.Server != "nats://from-baton-url:4222" || c.HostID != "flag-host" || c.Timeout != 9*time.Second || c.Prefix != "envp" || c.Inbox != "_INBOX_env" {
		t.Errorf("resolved %+v", c)
	}

	var d Config
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	d.Register(fs)
	if err := fs.Parse([]string{"--timeout", "0s"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Resolve(func(string) string { return "" }); !errors.Is(err, ErrUsage) {
		t.Errorf("--timeout 0s: %v, want a usage error", err)
	}
	if d.Prefix != session.DefaultPrefix && d.Prefix != "" {
		t.Errorf("default prefix %q", d.Prefix)
	}
}

func TestFence_FromTheRunEnvironmentOnlyForItsSlot(t *testing.T) {
	env := map[string]string{"BATON_SLOT": "a", "BATON_FENCE": "17"}
	f := &Factory{Getenv: func(k string) string { return env[k] }}
	for _, tc := range []struct {
		slot string
		flag uint64
		want uint64
	}{{"a", 0, 17}, {"b", 0, 0}, {"a", 5, 5}} {
		if got, err := f.Fence(tc.slot, tc.flag); err != nil || got != tc.want {
			t.Errorf("Fence(%q, %d) = %d, %v; want %d", tc.slot, tc.flag, got, err, tc.want)
		}
	}
}

func TestHint_SaysWhatToPassForAuthAndTLS(t *testing.T) {
	refusedOp := fmt.Errorf("%w: write b-sessions/s: %w", kv.ErrPermission, fmt.Errorf("%w: Permissions Violation for Publish to \"$KV.b-sessions.s\"", nats.ErrPermissionViolation))
	refusedConn := fmt.Errorf("%w: nats://127.0.0.1:4222 refused the credentials: %w", kv.ErrPermission, nats.ErrAuthorization)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{refusedOp, "--prefix"},
		{refusedConn, "check the credentials"},
		{fmt.Errorf("%w: %w", ErrNoCredentials, refusedConn), "--user and --password"},
		{fmt.Errorf("%w: %w", kv.ErrUnavailable, x509.UnknownAuthorityError{}), "--tls-ca"},
		{fmt.Errorf("%w: %w", kv.ErrUnavailable, x509.HostnameError{Host: "h"}), "--server"},
		{fmt.Errorf("%w: %w: connection closed", kv.ErrUnavailable, nats.ErrTLS), "--tls-cert"},
		{fmt.Errorf("%w: %w", kv.ErrUnavailable, &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}), "--tls-cert"},
	} {
		if got := Hint(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("Hint(%v) = %q, want it to name %s", tc.err, got, tc.want)
		}
		if Code(tc.err) != ExitUnavailable {
			t.Errorf("Code(%v) = %d, want %d", tc.err, Code(tc.err), ExitUnavailable)
		}
	}
}

func TestFactory_CredentialsFromFlagsOrURL(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		want bool
	}{
		{Config{}, false},
		{Config{User: "alice"}, true},
		{Config{Token: "t"}, true},
		{Config{NKey: "f"}, true},
		{Config{Creds: "f"}, true},
		{Config{Context: "c"}, true},
		{Config{TLSCert: "c", TLSKey: "k"}, true},
		{Config{TLSCA: "ca"}, false},
	} {
		if got := (&Factory{Config: tc.c}).HasCredentials(); got != tc.want {
			t.Errorf("HasCredentials(%+v) = %v", tc.c, got)
		}
	}
	if !urlHasUser("nats://a:4222,nats://alice:pw@b:4222") || urlHasUser("nats://a:4222,tls://b:4222") {
		t.Error("urlHasUser does not tell URLs with user information")
	}
}

func TestHint_AnAccountWithoutJetStream(t *testing.T) {
	err := fmt.Errorf("%w: read bucket b: %w", kv.ErrJetStreamDisabled,
		&jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabledForAccount, Description: "JetStream not enabled for account"})
	if !JetStreamOffForAccount(err) || !strings.Contains(Hint(err), "jetstream: enabled") {
		t.Errorf("Hint = %q", Hint(err))
	}
	if JetStreamOffForAccount(fmt.Errorf("%w: no responders", kv.ErrJetStreamDisabled)) {
		t.Error("JetStream off on the server taken for an account without it")
	}
}

// A write refused for lack of storage says that the server's disk is full
// and what to do, as one line, exit 6.
func TestMessage_AFullDisk(t *testing.T) {
	err := fmt.Errorf("%w: write baton-sessions/s on nats://127.0.0.1:4222 refused: %w", kv.ErrStorageFull,
		&jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"})
	got := Message("join", err)
	for _, want := range []string{"baton: join: the server's storage is full: write baton-sessions/s", "insufficient resources",
		"; the server's disk is full", "free space on the disk that holds its store (`baton up --store DIR`)", "writes resume once there is room"} {
		if !strings.Contains(got, want) {
			t.Errorf("Message = %q, want it to say %q", got, want)
		}
	}
	if Code(err) != ExitUnavailable {
		t.Errorf("Code = %d, want %d", Code(err), ExitUnavailable)
	}
}

func TestVersionOf(t *testing.T) {
	set := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: set("vcs.revision", "a33de8aa26a71a71b8d7d6219c8900ed7f98f02b", "vcs.modified", "false")}, "dev+a33de8aa26a7"},
		{debug.BuildInfo{Settings: set("vcs.revision", "a33de8aa26a71a71b8d7d6219c8900ed7f98f02b", "vcs.modified", "true")}, "dev+a33de8aa26a7.dirty"},
		{debug.BuildInfo{Settings: set("vcs.revision", "abc")}, "dev+abc"},
	} {
		if got := VersionOf(&tc.bi); got != tc.want {
			t.Errorf("VersionOf(%+v) = %q, want %q", tc.bi, got, tc.want)
		}
	}
}
