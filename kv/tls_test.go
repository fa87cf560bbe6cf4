package kv_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvtest"
)

// testCA makes a CA and a server certificate for 127.0.0.1, written as PEM
// files in dir; it returns the CA file and the server's TLS config.
func testCA(t *testing.T, dir string) (string, *tls.Config) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvDER}, PrivateKey: srvKey}},
		MinVersion:   tls.VersionTLS12,
	}
}

func TestConnect_TLSWithTheServersCA(t *testing.T) {
	ctx := context.Background()
	caFile, tlsConf := testCA(t, t.TempDir())
	s := kvtest.StartServer(t, kv.WithServerOptions(func(o *server.Options) {
		o.TLSConfig, o.TLS, o.TLSTimeout = tlsConf, true, 2
	}))
	url := "tls://" + s.NATS().Addr().String()
	c, err := kv.Connect(ctx, kv.WithURL(url), kv.WithTLS(caFile, "", ""))
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

func TestConnect_Token(t *testing.T) {
	ctx := context.Background()
	s := kvtest.StartServer(t, kv.WithServerOptions(func(o *server.Options) { o.Authorization = "t0ken" }))
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
	s := kvtest.StartServer(t, kv.WithServerOptions(func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} }))
	if _, err := kv.Connect(ctx, kv.WithURL(s.ClientURL())); !errors.Is(err, kv.ErrPermission) {
		t.Errorf("without the nkey: %v, want ErrPermission", err)
	}
	c, err := kv.Connect(ctx, kv.WithURL(s.ClientURL()), kv.WithNKeyFile(seedFile))
	if err != nil {
		t.Fatalf("with the nkey: %v", err)
	}
	c.Close()
}
