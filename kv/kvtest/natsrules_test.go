package kvtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv/kvtest"
)

// TestNATSRulesAgreeWithJetStream pins the copied rules to the library they
// were copied from: jetstream itself accepts or refuses each name.
func TestNATSRulesAgreeWithJetStream(t *testing.T) {
	srv := kvtest.StartServer(t)
	c := kvtest.Connect(t, srv.ClientURL())
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "rules"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"a", "rendering", "A-Z_a-z=0.9", "a/b", "/", "a.b.c", "-", "=", "_",
		"", ".", "..", ".a", "a.", "a..b", "a b", "a*", "a>", "*", ">", "é", "a\x00", "a\tb", "a\nb",
		strings.Repeat("k", 300),
	} {
		_, err := bucket.Put(ctx, key, []byte("v"))
		if got := !errors.Is(err, jetstream.ErrInvalidKey); got != kvtest.NATSKeyValid(key) {
			t.Errorf("key %q: jetstream Put = %v, NATSKeyValid = %v", key, err, kvtest.NATSKeyValid(key))
		}
	}
	for _, name := range []string{
		"baton-sessions", "a", "A_b-9", "", "a.b", "a b", "a/b", "a*", "a>", "é", "a=b",
	} {
		_, err := js.KeyValue(ctx, name)
		if got := !errors.Is(err, jetstream.ErrInvalidBucketName); got != kvtest.NATSBucketValid(name) {
			t.Errorf("bucket %q: jetstream KeyValue = %v, NATSBucketValid = %v", name, err, kvtest.NATSBucketValid(name))
		}
	}
}
