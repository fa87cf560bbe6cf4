package kv_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/kv"
)

// The answers a server gives to the writes baton sends are read by the
// short path: a stored write, at the revision the general decoding reads.
func TestParsePubAck_TakesTheServersAnswers(t *testing.T) {
	c, b := testBucket(t)
	subject := "$KV." + b.Config().Name + ".k"
	var last uint64
	for range 3 {
		m := nats.NewMsg(subject)
		m.Data = []byte("v")
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
		m.Header.Set("Nats-TTL", time.Minute.String())
		resp, err := c.Conn().RequestMsg(m, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var want struct {
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(resp.Data, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := kv.ParsePubAck(resp.Data)
		if !ok || got != want.Seq {
			t.Fatalf("answer %s: read %d, %v; want %d", resp.Data, got, ok, want.Seq)
		}
		last = got
	}
}

// pubAck is the answer as the general way reads it.
type pubAck struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	Seq   uint64              `json:"seq"`
}

// FuzzParsePubAck: whatever the short path reads, the general way reads
// the same: a stored write (no error) at the same revision.
func FuzzParsePubAck(f *testing.F) {
	for _, s := range []string{
		`{"stream":"KV_a","seq":7}`,
		`{"stream":"KV_a","seq":7,"duplicate":true}`,
		`{"stream":"KV_a","domain":"hub","seq":7}`,
		`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"KV_a","seq":0}`,
		`{"stream":"KV_a","seq":0}`,
		`{"stream":"KV_a","seq":007}`,
		`{"stream":"KV_\u0061","seq":7}`,
		`{"stream":"KV_a","seq":18446744073709551616}`,
		`{"stream":"KV_a","seq":7} `,
		`{"stream":"KV_a","seq":1e3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		seq, ok := kv.ParsePubAck(data)
		if !ok {
			return
		}
		var ack pubAck
		if err := json.Unmarshal(data, &ack); err != nil {
			t.Fatalf("%q: read %d, but it does not decode: %v", data, seq, err)
		}
		if ack.Error != nil || ack.Seq != seq || seq == 0 {
			t.Fatalf("%q: read %d, the general way %+v", data, seq, ack)
		}
	})
}
