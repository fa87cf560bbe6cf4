package natsctx

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"golang.org/x/net/proxy"
)

// NATSOptions turns the context into nats.go options: credentials, then a
// token, the TLS files, the SOCKS proxy, the inbox prefix and TLS first, in
// the nats CLI's order. References in the credential fields are resolved
// now, under ctx (op and nsc run commands); a creds or nkey file named by
// a path is read when the connection is made. It returns ErrCredential for
// a credential that cannot be resolved or decoded, and ErrUnsupported for a
// Windows certificate store or a TLS file named by a reference.
func (c *Context) NATSOptions(ctx context.Context) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.User != "":
		password, err := resolveValue(ctx, c.Password)
		if err != nil {
			return nil, fmt.Errorf("%w: password: %w", ErrCredential, err)
		}
		opts = append(opts, nats.UserInfo(c.User, password))
	case c.credsRef() != "":
		o, err := credsOption(ctx, c.credsRef())
		if err != nil {
			return nil, fmt.Errorf("%w: creds: %w", ErrCredential, err)
		}
		opts = append(opts, o)
	case c.NKey != "":
		o, err := nkeyOption(ctx, c.NKey)
		if err != nil {
			return nil, fmt.Errorf("%w: nkey: %w", ErrCredential, err)
		}
		opts = append(opts, o)
	case c.UserJWT != "":
		jwt, err := resolveValue(ctx, c.UserJWT)
		if err != nil {
			return nil, fmt.Errorf("%w: user_jwt: %w", ErrCredential, err)
		}
		if c.UserSeed == "" {
			// A JWT alone: for a server that does not ask for a signed
			// nonce.
			opts = append(opts, nats.UserJWT(func() (string, error) { return jwt, nil }, func([]byte) ([]byte, error) { return nil, nil }))
			break
		}
		seed, err := resolveValue(ctx, c.UserSeed)
		if err != nil {
			return nil, fmt.Errorf("%w: user_seed: %w", ErrCredential, err)
		}
		opts = append(opts, nats.UserJWTAndSeed(jwt, seed))
	}
	if c.Token != "" {
		token, err := resolveValue(ctx, c.Token)
		if err != nil {
			return nil, fmt.Errorf("%w: token: %w", ErrCredential, err)
		}
		opts = append(opts, nats.Token(token))
	}
	if c.Cert != "" && c.Key != "" {
		cert, err := tlsPath("cert", c.Cert)
		if err != nil {
			return nil, err
		}
		key, err := tlsPath("key", c.Key)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.ClientCert(cert, key))
	}
	if c.CA != "" {
		ca, err := tlsPath("ca", c.CA)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.RootCAs(ca))
	}
	if c.SocksProxy != "" {
		opts = append(opts, nats.SetCustomDialer(socksDialer{proxy: c.SocksProxy}))
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if c.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	if c.WindowsCertStore != "" {
		return nil, fmt.Errorf("%w: windows_cert_store %q: a Windows certificate store cannot be used here; give the certificate, key and CA as files (cert, key, ca)", ErrUnsupported, c.WindowsCertStore)
	}
	return opts, nil
}

// credsOption authenticates with a credentials file (a JWT and its nkey
// seed). A path, or a file:// reference, is handed to nats.go, which reads
// the file at each connect; other references are resolved now and kept in
// memory, the resolved bytes wiped.
func credsOption(ctx context.Context, ref string) (nats.Option, error) {
	if s := scheme(ref); s == "" || s == "file" {
		return nats.UserCredentials(filePath(ref)), nil
	}
	data, err := resolveRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer wipe(data)
	jwt, err := nkeys.ParseDecoratedJWT(data)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return nil, err
	}
	return nats.UserJWT(func() (string, error) { return jwt, nil }, kp.Sign), nil
}

// nkeyOption authenticates with an nkey seed, from a file or a reference.
func nkeyOption(ctx context.Context, ref string) (nats.Option, error) {
	if s := scheme(ref); s == "" || s == "file" {
		return nats.NkeyOptionFromSeed(filePath(ref))
	}
	data, err := resolveRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer wipe(data)
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return nil, err
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return nats.Nkey(pub, kp.Sign), nil
}

// tlsPath is the file a TLS field names: nats.go reads TLS material from
// files only, so a reference other than file:// is refused, not ignored.
func tlsPath(field, ref string) (string, error) {
	if s := scheme(ref); s != "" && s != "file" {
		return "", fmt.Errorf("%w: %s: %s references are not supported; give a file path", ErrUnsupported, field, s)
	}
	return filePath(ref), nil
}

// socksDialer dials the server through a SOCKS5 proxy.
type socksDialer struct{ proxy string }

func (d socksDialer) Dial(network, address string) (net.Conn, error) {
	u, err := url.Parse(d.proxy)
	if err != nil {
		return nil, err
	}
	p, err := proxy.FromURL(u, proxy.Direct)
	if err != nil {
		return nil, err
	}
	return p.Dial(network, address)
}
