package kv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/kv/kvtest"
)

// startTLSServer starts a server that requires TLS with a certificate of
// ca, and client certificates of ca too when verify.
func startTLSServer(t *testing.T, ca *kvtest.CA, verify bool) string {
	t.Helper()
	cert, key := ca.ServerCert()
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: cert, KeyFile: key, CaFile: ca.File, Verify: verify})
	if err != nil {
		t.Fatal(err)
	}
	s := kvtest.StartServer(t, kvserver.WithServerOptions(func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, verify, 2
	}))
	return "tls://" + s.NATS().Addr().String()
}

func TestConnect_TLSWithTheServersCA(t *testing.T) {
	ctx := context.Background()
	ca := kvtest.NewCA(t)
	url := startTLSServer(t, ca, false)
	c, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTLS(ca.File, "", ""))
	if err != nil {
		t.Fatalf("connect with the CA: %v", err)
	}
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "b", MarkerTTL: time.Minute}); err != nil {
		t.Errorf("use over TLS: %v", err)
	}
	c.Close()
	// Without the CA the server's certificate is not trusted.
	if _, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTimeout(2*time.Second)); !errors.Is(err, kv.ErrUnavailable) {
		t.Errorf("connect without the CA: %v, want ErrUnavailable", err)
	}
}

func TestConnect_MutualTLSNeedsTheClientCertificate(t *testing.T) {
	ctx := context.Background()
	ca := kvtest.NewCA(t)
	url := startTLSServer(t, ca, true)
	cert, key := ca.ClientCert("alice")
	c, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTLS(ca.File, cert, key))
	if err != nil {
		t.Fatalf("connect with a client certificate: %v", err)
	}
	if _, err := c.Ensure(ctx, kv.BucketConfig{Name: "b", MarkerTTL: time.Minute}); err != nil {
		t.Errorf("use over mutual TLS: %v", err)
	}
	c.Close()
	if _, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTLS(ca.File, "", ""), kv.WithTimeout(2*time.Second)); err == nil {
		t.Error("connect without a client certificate: no error")
	}
	// A certificate from another CA is refused as well.
	otherCert, otherKey := kvtest.NewCA(t).ClientCert("mallory")
	if _, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTLS(ca.File, otherCert, otherKey), kv.WithTimeout(2*time.Second)); err == nil {
		t.Error("connect with another CA's client certificate: no error")
	}
	if _, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTLS(ca.File, cert, "")); !errors.Is(err, kv.ErrInvalidConfig) {
		t.Errorf("a certificate without its key: %v, want ErrInvalidConfig", err)
	}
}
