package kv_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton/internal/natsctx/natsclitest"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

func TestConnect_Token(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Authorization = "t0ken" }))
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithToken("wrong")); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("wrong token: %v, want ErrPermission", err)
	}
	c, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithToken("t0ken"))
	if err != nil {
		t.Fatalf("right token: %v", err)
	}
	c.Close()
}

func TestConnect_NKey(t *testing.T) {
	ctx := context.Background()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} }))
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL())); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("without the nkey: %v, want ErrPermission", err)
	}
	c, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithNKeyFile(seedFile))
	if err != nil {
		t.Fatalf("with the nkey: %v", err)
	}
	c.Close()
}

// TestConnect_CredsInOperatorMode runs a server in operator mode (JWTs, as
// NGS and nsc set up) and connects with a user's credentials file.
func TestConnect_CredsInOperatorMode(t *testing.T) {
	ctx := context.Background()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	oc := jwt.NewOperatorClaims(opPub)
	if _, err := oc.Encode(op); err != nil {
		t.Fatal(err)
	}
	acc, _ := nkeys.CreateAccount()
	accPub, _ := acc.PublicKey()
	ac := jwt.NewAccountClaims(accPub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := ac.Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	// JetStream in operator mode needs a system account.
	sys, _ := nkeys.CreateAccount()
	sysPub, _ := sys.PublicKey()
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	for pub, claims := range map[string]string{accPub: accJWT, sysPub: sysJWT} {
		if err := resolver.Store(pub, claims); err != nil {
			t.Fatal(err)
		}
	}
	creds := func(signer nkeys.KeyPair) string {
		usr, _ := nkeys.CreateUser()
		usrPub, _ := usr.PublicKey()
		userJWT, err := jwt.NewUserClaims(usrPub).Encode(signer)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := usr.Seed()
		b, err := jwt.FormatUserConfig(userJWT, seed)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "user.creds")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) {
		o.TrustedOperators = []*jwt.OperatorClaims{oc}
		o.AccountResolver = resolver
		o.SystemAccount = sysPub
	}))
	c, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithCredsFile(creds(acc)))
	if err != nil {
		t.Fatalf("with the account's user: %v", err)
	}
	defer c.Close()
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "b", MarkerTTL: time.Minute}); err != nil {
		t.Errorf("use with creds: %v", err)
	}
	// A user signed by an account the operator does not know is refused.
	stranger, _ := nkeys.CreateAccount()
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithCredsFile(creds(stranger))); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("a stranger's creds: %v, want ErrPermission", err)
	}
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL())); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("no creds: %v, want ErrPermission", err)
	}
}

// TestConnect_ContextCarriesCredentials connects with a nats CLI context
// that holds the URL, a user and a password, as `--context` does.
func TestConnect_ContextCarriesCredentials(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Username, o.Password = "alice", "ctx-pw" }))
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	natsclitest.Save(t, home, "good", "--server", s.ClientURL(), "--user", "alice", "--password", "ctx-pw")
	natsclitest.Save(t, home, "bad", "--server", s.ClientURL(), "--user", "alice", "--password", "other")
	c, err := kv.Connect(ctx, kv.WithContext("good"))
	if err != nil {
		t.Fatalf("connect with the context: %v", err)
	}
	c.Close()
	_, err = kv.Connect(ctx, kv.WithContext("bad"))
	if !errors.Is(err, kv.ErrPermission) || strings.Contains(err.Error(), "other") {
		t.Errorf("a context with a wrong password: %v, want ErrPermission without the password", err)
	}
	// Options given beside the context win over it.
	c, err = kv.Connect(ctx, kv.WithContext("bad"), kv.WithUserPassword("alice", "ctx-pw"))
	if err != nil {
		t.Fatalf("the context's password overridden: %v", err)
	}
	c.Close()
}

// TestConnect_ContextErrorsAreInvalidConfig: a context that is missing,
// does not decode, names JetStream in another domain or account, or holds
// a credential that cannot be read is a configuration error, before any
// connection is tried.
func TestConnect_ContextErrorsAreInvalidConfig(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", home)
	natsclitest.Save(t, home, "domain", "--server", "nats://127.0.0.1:1", "--js-domain", "hub")
	natsclitest.Save(t, home, "prefix", "--server", "nats://127.0.0.1:1", "--js-api-prefix", "acct.API")
	natsclitest.Save(t, home, "unset", "--server", "nats://127.0.0.1:1", "--user", "env://BATON_TEST_UNSET")
	malformed := natsclitest.Save(t, home, "malformed")
	if err := os.WriteFile(malformed, []byte(`{"url": `), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, says := range map[string]string{
		"domain":    "JetStream domain or API prefix",
		"prefix":    "JetStream domain or API prefix",
		"unset":     "BATON_TEST_UNSET is not set",
		"malformed": "malformed.json",
		"missing":   "nats context save missing",
		"a/b":       "must not contain",
	} {
		_, err := kv.Connect(ctx, kv.WithContext(name))
		if !errors.Is(err, kv.ErrInvalidConfig) || !strings.Contains(err.Error(), fmt.Sprintf("nats context %q", name)) || !strings.Contains(err.Error(), says) {
			t.Errorf("context %s: %v; want ErrInvalidConfig naming it and saying %q", name, err, says)
		}
	}
}

// bucketPermissions are the permissions a user needs to use the buckets
// (not to create them), with replies on inbox.> (README, "Security").
func bucketPermissions(inbox string, buckets ...string) *server.Permissions {
	var pub []string
	for _, b := range buckets {
		pub = append(pub,
			"$KV."+b+".>",
			"$JS.API.STREAM.INFO.KV_"+b,
			"$JS.API.STREAM.MSG.GET.KV_"+b,
			"$JS.API.CONSUMER.CREATE.KV_"+b+".>",
			"$JS.API.CONSUMER.DELETE.KV_"+b+".>",
			"$JS.FC.KV_"+b+".>")
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{inbox + ".>"}},
	}
}

// asyncErrors records a connection's asynchronous errors.
type asyncErrors struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrors) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errs = append(a.errs, err)
}

func (a *asyncErrors) get() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.errs...)
}

func TestPermissions_ABucketsUserDoesEverythingOnThemAndNothingElse(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "admin", Password: "admin-pw"},
			{Username: "alice", Password: "alice-pw", Permissions: bucketPermissions("_INBOX_alice", "a")},
		}
	}))
	admin := kvtest.Connect(t, s.ClientURL(), kv.WithUserPassword("admin", "admin-pw"))
	cfgA, cfgB := kv.BucketConfig{Name: "a", MarkerTTL: time.Minute}, kv.BucketConfig{Name: "b", MarkerTTL: time.Minute}
	for _, cfg := range []kv.BucketConfig{cfgA, cfgB} {
		if _, err := admin.Ensure(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	bRev, err := admin.Bucket(cfgB).Create(ctx, "x", []byte("bob's"), 0)
	if err != nil {
		t.Fatal(err)
	}
	// More than the 2 MiB a watch may have unanswered before the server
	// waits for a flow-control reply: listing them needs $JS.FC.
	js, err := jetstream.New(admin.Conn())
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 1024))
	const many = 2600
	for i := range many {
		if _, err := js.PublishAsync(fmt.Sprintf("$KV.a.bulk%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("bulk writes not acknowledged")
	}

	var errs asyncErrors
	alice := kvtest.Connect(t, s.ClientURL(), kv.WithUserPassword("alice", "alice-pw"), kv.WithInboxPrefix("_INBOX_alice"),
		kv.WithTimeout(20*time.Second), kv.WithNATSOptions(nats.ErrorHandler(errs.handler)))

	t.Run("its buckets", func(t *testing.T) {
		a := alice.Bucket(cfgA)
		if err := alice.Check(ctx, cfgA); err != nil {
			t.Errorf("check: %v", err)
		}
		if _, err := a.ServerTime(ctx); err != nil {
			t.Errorf("server time: %v", err)
		}
		rev, err := a.Create(ctx, "k", []byte("1"), 10*time.Second)
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if rev, err = a.Update(ctx, "k", []byte("2"), 10*time.Second, rev); err != nil {
			t.Fatalf("update: %v", err)
		}
		if e, err := a.Get(ctx, "k"); err != nil || string(e.Value) != "2" {
			t.Errorf("get: %v, %v", e, err)
		}
		w, err := a.Watch(ctx, "k")
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if err := a.Delete(ctx, "k", rev, []byte("done")); err != nil {
			t.Errorf("delete: %v", err)
		}
		for seen := false; !seen; {
			select {
			case e := <-w.Updates():
				seen = e != nil && e.Op == kv.OpDelete
			case <-time.After(5 * time.Second):
				t.Fatal("the watch did not see the delete")
			}
		}
		w.Stop()
		entries, err := a.List(ctx)
		if err != nil || len(entries) != many {
			t.Errorf("list: %d entries, %v; want %d", len(entries), err, many)
		}
		if err := alice.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the consumers' deletes are not waited for
		if got := errs.get(); len(got) != 0 {
			t.Errorf("the server refused some of what baton needs: %v", got)
		}
	})

	t.Run("other buckets, at once", func(t *testing.T) {
		b := alice.Bucket(cfgB)
		for what, call := range map[string]func() error{
			"latest": func() error { _, err := b.Latest(ctx, "x"); return err },
			"create": func() error { _, err := b.Create(ctx, "y", []byte("alice's"), 0); return err },
			"update": func() error { _, err := b.Update(ctx, "x", []byte("alice's"), 0, bRev); return err },
			"delete": func() error { return b.Delete(ctx, "x", bRev, nil) },
			"list":   func() error { _, err := b.List(ctx); return err },
			"check":  func() error { return alice.Check(ctx, cfgB) },
			"ensure": func() error {
				_, err := alice.Ensure(ctx, kv.BucketConfig{Name: "c", MarkerTTL: time.Minute})
				return err
			},
		} {
			start := time.Now()
			err := call()
			if !errors.Is(err, kv.ErrPermission) {
				t.Errorf("%s: %v, want ErrPermission", what, err)
			}
			// The timeout is 20s: a refusal is not waited out.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s: refused after %s, want at once", what, d)
			}
		}
		if e, err := admin.Bucket(cfgB).Get(ctx, "x"); err != nil || e.Revision != bRev || string(e.Value) != "bob's" {
			t.Errorf("b/x changed: %+v, %v", e, err)
		}
	})

	t.Run("a connection of the caller's, through NewClient", func(t *testing.T) {
		var errs asyncErrors
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("alice", "alice-pw"), nats.CustomInboxPrefix("_INBOX_alice"),
			nats.ErrorHandler(errs.handler))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		c, err := kv.NewClient(nc, kv.WithTimeout(20*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.Bucket(cfgB).Create(ctx, "y", []byte("alice's"), 0)
		if !errors.Is(err, kv.ErrPermission) || time.Since(start) > 5*time.Second {
			t.Errorf("create on another's bucket: %v after %s, want ErrPermission at once", err, time.Since(start))
		}
		if _, err := c.Bucket(cfgA).Latest(ctx, "bulk1"); err != nil {
			t.Errorf("read of its own bucket: %v", err)
		}
		// The caller's handler is still told of asynchronous errors, but of
		// the refusal the call returned.
		_ = nc.Publish("not.allowed", nil)
		_ = nc.Flush()
		deadline := time.Now().Add(5 * time.Second)
		for len(errs.get()) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		got := errs.get()
		if len(got) != 1 || !strings.Contains(got[0].Error(), "not.allowed") {
			t.Errorf("the caller's handler got %v, want the one refusal no call returned", got)
		}
	})

	t.Run("without its inbox prefix", func(t *testing.T) {
		c := kvtest.Connect(t, s.ClientURL(), kv.WithUserPassword("alice", "alice-pw"), kv.WithTimeout(20*time.Second),
			kv.WithNATSOptions(nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})))
		start := time.Now()
		_, err := c.Bucket(cfgA).Latest(ctx, "bulk1")
		if !errors.Is(err, kv.ErrPermission) || !strings.Contains(err.Error(), "_INBOX.>") || time.Since(start) > 5*time.Second {
			t.Errorf("read with replies on _INBOX: %v after %s, want ErrPermission naming _INBOX.> at once", err, time.Since(start))
		}
	})
}

func TestWithInboxPrefix_RefusesWildcardsAndEmpty(t *testing.T) {
	for _, p := range []string{"", "a.>", "a.*", "a b", ".a", "a."} {
		if _, err := kv.Connect(context.Background(), kv.WithInboxPrefix(p)); !errors.Is(err, kv.ErrInvalidConfig) {
			t.Errorf("inbox prefix %q: %v, want ErrInvalidConfig", p, err)
		}
	}
}

func TestConnect_NeverEchoesAPassword(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"nats://bob:s3cretpw@bad host:4222",
		"nats://a:4222,nats://bob:s3cret%zz@b:4222",
		"nats://bob:s3cretpw@127.0.0.1:1",
	} {
		_, err := kv.Connect(ctx, kv.WithURL(u), kv.WithTimeout(time.Second))
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("connect %q: %v (must fail without the password)", "***", err)
		}
	}
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) { o.Username, o.Password = "alice", "right-one" }))
	_, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithUserPassword("alice", "wrong-one"))
	if !errors.Is(err, kv.ErrPermission) || strings.Contains(err.Error(), "wrong-one") {
		t.Errorf("wrong password: %v, want ErrPermission without the password", err)
	}
	c, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithUserPassword("alice", "right-one"))
	if err != nil {
		t.Fatalf("right password: %v", err)
	}
	c.Close()
}
