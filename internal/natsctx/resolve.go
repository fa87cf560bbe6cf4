package natsctx

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// A credential field may hold a reference instead of the material itself:
//
//	file://PATH                      the file's bytes (PATH expanded as a path field)
//	env://NAME                       the environment variable's value, which must be set and not empty
//	data:[TYPE];base64,PAYLOAD       inline bytes (RFC 2397; base64 only)
//	op://VAULT/ITEM/FIELD            what `op read` prints (1Password's CLI)
//	nsc://OPERATOR/ACCOUNT/USER      the credentials file `nsc generate profile` names
//
// Schemes match without regard to case. A value with no scheme, or one of
// another scheme, is taken literally in Password, Token, UserJWT and
// UserSeed; in Creds and NKey a value with no scheme is a path and another
// scheme is an error.

// scheme is ref's URI scheme in lower case, or "" when it has none. A
// one-letter scheme is none: it is a Windows drive (C:\...).
func scheme(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || len(u.Scheme) < 2 {
		return ""
	}
	return u.Scheme
}

// resolveValue is the value of a literal field: the resolved reference,
// less trailing line ends, or ref itself when it is not a reference.
func resolveValue(ctx context.Context, ref string) (string, error) {
	if ref == "" || !knownScheme(scheme(ref)) {
		return ref, nil
	}
	data, err := resolveRef(ctx, ref)
	if err != nil {
		return "", err
	}
	defer wipe(data)
	return strings.TrimRight(string(data), "\r\n"), nil
}

func knownScheme(s string) bool {
	switch s {
	case "file", "env", "data", "op", "nsc":
		return true
	}
	return false
}

// resolveRef returns the bytes a reference names; the caller wipes them.
func resolveRef(ctx context.Context, ref string) ([]byte, error) {
	switch s := scheme(ref); s {
	case "file":
		return os.ReadFile(filePath(ref))
	case "env":
		return envRef(ref)
	case "data":
		return dataRef(ref)
	case "op":
		return opRef(ctx, ref)
	case "nsc":
		p, err := nscProfile(ctx, ref)
		if err != nil {
			return nil, err
		}
		if p.creds == "" {
			return nil, errors.New("nsc generate profile named no credentials file (user_creds)")
		}
		return os.ReadFile(p.creds)
	default:
		return nil, fmt.Errorf("%s references are not supported; use a file path, file://, env://, data:, op:// or nsc://", s)
	}
}

// filePath is the path a path field or file:// reference names.
func filePath(ref string) string {
	return expandPath(trimScheme(ref, "file://"))
}

// trimScheme removes prefix from ref, matching it without regard to case.
func trimScheme(ref, prefix string) string {
	if len(ref) >= len(prefix) && strings.EqualFold(ref[:len(prefix)], prefix) {
		return ref[len(prefix):]
	}
	return ref
}

func envRef(ref string) ([]byte, error) {
	name := trimScheme(ref, "env://")
	if name == "" {
		return nil, fmt.Errorf("%q names no environment variable; use env://NAME", ref)
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return nil, fmt.Errorf("environment variable %s is not set", name)
	}
	if v == "" {
		return nil, fmt.Errorf("environment variable %s is empty", name)
	}
	return []byte(v), nil
}

// dataRef decodes data:[TYPE];base64,PAYLOAD. Only base64 payloads are
// taken, so that material never depends on URL escaping.
func dataRef(ref string) ([]byte, error) {
	header, payload, ok := strings.Cut(trimScheme(ref, "data:"), ",")
	if !ok {
		return nil, errors.New("a data: reference needs a ',' before its payload: data:;base64,PAYLOAD")
	}
	base64Header := false
	for _, p := range strings.Split(header, ";") {
		base64Header = base64Header || strings.TrimSpace(p) == "base64"
	}
	if !base64Header {
		return nil, errors.New("a data: reference must be base64: data:;base64,PAYLOAD")
	}
	b, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("data: reference: %w", err)
	}
	return b, nil
}

// opRef runs `op read REF` (1Password's CLI) and returns what it prints.
// The scheme is written in lower case, as op expects it.
func opRef(ctx context.Context, ref string) ([]byte, error) {
	if rest := trimScheme(ref, "op://"); rest != ref {
		ref = "op://" + rest
	}
	out, err := exec.CommandContext(ctx, "op", "read", ref).Output()
	if err != nil {
		return nil, fmt.Errorf("op read: %w", err)
	}
	return out, nil
}

// profile is what baton takes of `nsc generate profile`'s answer.
type profile struct {
	creds string // the user's credentials file
	url   string // the operator's service URLs, comma-separated
}

// nscProfile runs `nsc generate profile nsc://OPERATOR/ACCOUNT/USER`. Its
// output carries credentials, so none of it goes into an error; nsc's
// stderr does.
func nscProfile(ctx context.Context, ref string) (profile, error) {
	nsc, err := exec.LookPath("nsc")
	if err != nil {
		return profile{}, errors.New("nsc is not on PATH; install nsc, or save the context with a credentials file")
	}
	cmd := exec.CommandContext(ctx, nsc, "generate", "profile", "nsc://"+trimScheme(ref, "nsc://"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return profile{}, fmt.Errorf("nsc generate profile: %w: %s", err, msg)
		}
		return profile{}, fmt.Errorf("nsc generate profile: %w", err)
	}
	var p struct {
		UserCreds string `json:"user_creds"`
		Operator  struct {
			Service []string `json:"service"`
		} `json:"operator"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return profile{}, fmt.Errorf("nsc generate profile printed what is not its JSON profile: %w", err)
	}
	return profile{creds: p.UserCreds, url: strings.Join(p.Operator.Service, ",")}, nil
}

// wipe overwrites resolved credential bytes once they are used.
func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
	runtime.KeepAlive(b) // the writes are not dead stores to elide
}
