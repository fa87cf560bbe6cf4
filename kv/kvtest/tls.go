package kvtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests: its certificate is the PEM file
// File, and it issues server and client certificates into a temporary
// directory. Everything is valid for an hour.
type CA struct {
	File string

	tb     testing.TB
	dir    string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial int64
}

// NewCA makes a CA.
func NewCA(tb testing.TB) *CA {
	tb.Helper()
	ca := &CA{tb: tb, dir: tb.TempDir(), key: newKey(tb), serial: 1}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		tb.Fatal(err)
	}
	ca.File = filepath.Join(ca.dir, "ca.pem")
	writePEM(tb, ca.File, "CERTIFICATE", der)
	return ca
}

// ServerCert issues a certificate for the server at 127.0.0.1 (and
// localhost) and returns its certificate and key files.
func (ca *CA) ServerCert() (certFile, keyFile string) {
	ca.tb.Helper()
	return ca.issue("server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// ClientCert issues a client certificate with the common name name and
// returns its certificate and key files.
func (ca *CA) ClientCert(name string) (certFile, keyFile string) {
	ca.tb.Helper()
	return ca.issue("client-"+name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(file string, tmpl *x509.Certificate) (string, string) {
	ca.tb.Helper()
	ca.serial++
	tmpl.SerialNumber = big.NewInt(ca.serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	key := newKey(ca.tb)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.tb.Fatal(err)
	}
	certFile, keyFile := filepath.Join(ca.dir, file+".pem"), filepath.Join(ca.dir, file+"-key.pem")
	writePEM(ca.tb, certFile, "CERTIFICATE", der)
	writePEM(ca.tb, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
