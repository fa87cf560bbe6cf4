package natsctx_test

// One test per field baton honours, each on a context the real nats CLI
// saved, and where the field decides a connection, against a real server
// that requires it.

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/batonhq/baton/internal/natsctx"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

func TestField_URL(t *testing.T) {
	s := kvtest.StartServer(t)
	c := saved(t, "--server", s.ClientURL())
	if c.ServerURL() != s.ClientURL() {
		t.Errorf("ServerURL %q, want %q", c.ServerURL(), s.ClientURL())
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect to the context's URL: %v", err)
	}
	nc.Close()

	list := "nats://127.0.0.1:1," + s.ClientURL()
	if c := saved(t, "--server", list); c.ServerURL() != list {
		t.Errorf("a list: ServerURL %q, want %q", c.ServerURL(), list)
	}
	// Saved without --server, the context holds nats.go's default URL.
	if c := saved(t, "--description", "no server"); c.ServerURL() != nats.DefaultURL {
		t.Errorf("no --server: ServerURL %q, want %q", c.ServerURL(), nats.DefaultURL)
	}
}

func TestField_UserAndPassword(t *testing.T) {
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Username, o.Password = "alice", "s3cret" }))
	c := saved(t, "--server", s.ClientURL(), "--user", "alice", "--password", "s3cret")
	if c.User != "alice" || c.Password != "s3cret" {
		t.Errorf("user %q, password %q", c.User, c.Password)
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect as alice: %v", err)
	}
	nc.Close()
	c = saved(t, "--server", s.ClientURL(), "--user", "alice", "--password", "wrong")
	if _, err := connect(c); !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a wrong password: %v, want an authorization violation", err)
	}
}

func TestField_Token(t *testing.T) {
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Authorization = "t0ken" }))
	// The nats CLI saves --user without --password as a token.
	c := saved(t, "--server", s.ClientURL(), "--user", "t0ken")
	if c.Token != "t0ken" || c.User != "" {
		t.Errorf("token %q, user %q; want the token alone", c.Token, c.User)
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect with the token: %v", err)
	}
	nc.Close()
}

func TestField_NKey(t *testing.T) {
	u := newUser(t)
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: u.pub}} }))
	seed := writeFile(t, t.TempDir(), "user.nk", u.seed(t))
	c := saved(t, "--server", s.ClientURL(), "--nkey", seed)
	if c.NKey != seed {
		t.Errorf("nkey %q, want %q", c.NKey, seed)
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect with the nkey: %v", err)
	}
	nc.Close()
}

func TestField_Creds(t *testing.T) {
	u := newUser(t)
	path := writeFile(t, t.TempDir(), "user.creds", u.creds(t))
	c := saved(t, "--creds", path)
	if c.Creds != path {
		t.Errorf("creds %q, want %q", c.Creds, path)
	}
	checkJWTAuth(t, options(t, c), u, true)
}

func TestField_UserJWTAndSeed(t *testing.T) {
	u := newUser(t)
	c := saved(t, "--jwt", u.jwt, "--seed", string(u.seed(t)))
	checkJWTAuth(t, options(t, c), u, true)
	// A JWT alone is presented, and no nonce is signed.
	c = saved(t, "--jwt", u.jwt)
	checkJWTAuth(t, options(t, c), u, false)
}

func TestField_TLSCertKeyAndCA(t *testing.T) {
	ca := kvtest.NewCA(t)
	url := startTLSServer(t, ca, true, false)
	cert, key := ca.ClientCert("alice")
	c := saved(t, "--server", url, "--tlscert", cert, "--tlskey", key, "--tlsca", ca.File)
	if c.Cert != cert || c.Key != key || c.CA != ca.File {
		t.Errorf("cert %q, key %q, ca %q", c.Cert, c.Key, c.CA)
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect with the client certificate: %v", err)
	}
	nc.Close()
	// A certificate without its key is not used, as by the nats CLI: the
	// server that requires one refuses the connection.
	c = saved(t, "--server", url, "--tlscert", cert, "--tlsca", ca.File)
	if o := options(t, c); o.TLSConfig != nil && len(o.TLSConfig.Certificates) > 0 {
		t.Errorf("a certificate without a key was used")
	}
	if nc, err := connect(c); err == nil {
		nc.Close()
		t.Error("connected to a server that requires a client certificate without one")
	}
}

func TestField_TLSFirst(t *testing.T) {
	ca := kvtest.NewCA(t)
	url := startTLSServer(t, ca, false, true)
	c := saved(t, "--server", url, "--tlsca", ca.File, "--tlsfirst")
	if !c.TLSFirst {
		t.Error("tls_first not read")
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect to a TLS-first server: %v", err)
	}
	nc.Close()
	// Without it the server's greeting never comes.
	c = saved(t, "--server", url, "--tlsca", ca.File)
	if nc, err := nats.Connect(c.ServerURL(), append(mustOptions(t, c), nats.Timeout(500*time.Millisecond))...); err == nil {
		nc.Close()
		t.Error("connected to a TLS-first server without tls_first")
	}
}

func TestField_SocksProxy(t *testing.T) {
	s := kvtest.StartServer(t)
	p := startSOCKS5(t)
	c := saved(t, "--server", s.ClientURL(), "--socks-proxy", "socks5://"+p.addr)
	if c.SocksProxy != "socks5://"+p.addr {
		t.Errorf("socks_proxy %q", c.SocksProxy)
	}
	nc, err := connect(c)
	if err != nil {
		t.Fatalf("connect through the proxy: %v", err)
	}
	nc.Close()
	if got := p.dialed(); len(got) != 1 || got[0] != strings.TrimPrefix(s.ClientURL(), "nats://") {
		t.Errorf("the proxy dialed %q, want the server once", got)
	}
}

func TestField_InboxPrefix(t *testing.T) {
	s := kvtest.StartServer(t)
	c := saved(t, "--server", s.ClientURL(), "--inbox-prefix", "_INBOX_alice")
	nc, err := connect(c)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if inbox := nc.NewInbox(); !strings.HasPrefix(inbox, "_INBOX_alice.") {
		t.Errorf("an inbox %q, want one under _INBOX_alice", inbox)
	}
}

func TestField_JetStreamDomainAndAPIPrefix(t *testing.T) {
	// Read for the caller, which refuses them (kv.Connect).
	if c := saved(t, "--js-domain", "hub"); c.JSDomain != "hub" {
		t.Errorf("jetstream_domain %q, want hub", c.JSDomain)
	}
	if c := saved(t, "--js-api-prefix", "acct.API"); c.JSAPIPrefix != "acct.API" {
		t.Errorf("jetstream_api_prefix %q, want acct.API", c.JSAPIPrefix)
	}
}

func TestField_WindowsCertStoreIsRefused(t *testing.T) {
	// The nats CLI offers --certstore on Windows only, where baton does not
	// run: the file is written as it writes it there.
	home := configHome(t)
	writeFile(t, home, "nats/context/win.json", []byte(`{"url": "nats://127.0.0.1:4222", "windows_cert_store": "user", "windows_cert_match_by": "subject", "windows_cert_match": "alice"}`))
	c, err := natsctx.Load(t.Context(), "win")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.NATSOptions(t.Context()); !errors.Is(err, natsctx.ErrUnsupported) || !strings.Contains(err.Error(), "cert, key, ca") {
		t.Errorf("a Windows certificate store: %v, want ErrUnsupported saying to use files", err)
	}
}

// TestField_CredentialsInTheNATSCLIsOrder: a context edited by hand can
// hold several kinds of credentials; the nats CLI uses the user, else the
// creds, else the nkey, else the JWT, and a token beside any of them.
func TestField_CredentialsInTheNATSCLIsOrder(t *testing.T) {
	u := newUser(t)
	dir := t.TempDir()
	creds := writeFile(t, dir, "u.creds", u.creds(t))
	seed := writeFile(t, dir, "u.nk", u.seed(t))
	home := configHome(t)
	for name, doc := range map[string]string{
		"user":  `{"user": "alice", "password": "pw", "creds": "` + creds + `", "token": "tok"}`,
		"creds": `{"creds": "` + creds + `", "nkey": "` + seed + `", "user_jwt": "other"}`,
		"nkey":  `{"nkey": "` + seed + `", "user_jwt": "other"}`,
	} {
		writeFile(t, home, "nats/context/"+name+".json", []byte(doc))
	}
	load := func(name string) *natsctx.Context {
		c, err := natsctx.Load(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if o := options(t, load("user")); o.User != "alice" || o.Password != "pw" || o.UserJWT != nil || o.Token != "tok" {
		t.Errorf("user beside creds and a token: user %q, password %q, JWT set %v, token %q", o.User, o.Password, o.UserJWT != nil, o.Token)
	}
	checkJWTAuth(t, options(t, load("creds")), u, true)
	if o := options(t, load("nkey")); o.Nkey != u.pub || o.UserJWT != nil {
		t.Errorf("nkey beside a JWT: nkey %q, JWT set %v", o.Nkey, o.UserJWT != nil)
	}
}

// startTLSServer starts a server with a certificate of ca, requiring
// client certificates of ca when verify, and the TLS handshake before its
// greeting when first; it returns the server's tls:// URL.
func startTLSServer(t *testing.T, ca *kvtest.CA, verify, first bool) string {
	t.Helper()
	cert, key := ca.ServerCert()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key, CaFile: ca.File, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout, o.TLSHandshakeFirst = tc, true, verify, 2, first
	}))
	return "tls://" + s.NATS().Addr().String()
}

func mustOptions(t *testing.T, c *natsctx.Context) []nats.Option {
	t.Helper()
	opts, err := c.NATSOptions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// socks5 is a SOCKS5 proxy without authentication that records the
// addresses it was asked to dial.
type socks5 struct {
	addr string
	mu   sync.Mutex
	to   []string
}

func (p *socks5) dialed() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.to...)
}

func startSOCKS5(t *testing.T) *socks5 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &socks5{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var closed atomic.Bool
	var conns sync.Map
	t.Cleanup(func() {
		closed.Store(true)
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				up, err := p.handshake(c)
				if err != nil {
					if !closed.Load() {
						t.Errorf("socks5: %v", err)
					}
					return
				}
				conns.Store(up, true)
				defer up.Close()
				done := make(chan struct{})
				go func() { defer close(done); io.Copy(up, c); up.Close() }()
				io.Copy(c, up)
				c.Close()
				<-done
			}()
		}
	}()
	return p
}

// handshake answers a client's greeting and CONNECT request (RFC 1928) and
// dials what it asks for.
func (p *socks5) handshake(c net.Conn) (net.Conn, error) {
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil || head[0] != 5 {
		return nil, errors.New("not a SOCKS5 greeting")
	}
	if _, err := io.ReadFull(c, make([]byte, head[1])); err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return nil, err
	}
	var req [4]byte
	if _, err := io.ReadFull(c, req[:]); err != nil || req[1] != 1 {
		return nil, errors.New("not a CONNECT request")
	}
	var host string
	switch req[3] {
	case 1, 4:
		ip := make([]byte, map[byte]int{1: 4, 4: 16}[req[3]])
		if _, err := io.ReadFull(c, ip); err != nil {
			return nil, err
		}
		host = net.IP(ip).String()
	case 3:
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return nil, err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(c, name); err != nil {
			return nil, err
		}
		host = string(name)
	}
	var port [2]byte
	if _, err := io.ReadFull(c, port[:]); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:]))))
	p.mu.Lock()
	p.to = append(p.to, addr)
	p.mu.Unlock()
	up, err := net.Dial("tcp", addr)
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return nil, err
	}
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		up.Close()
		return nil, err
	}
	return up, nil
}
