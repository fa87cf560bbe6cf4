package kv

import "testing"

// A delivery's sequence, time and pending count are read from its ack
// subject in both the forms servers write (the tokens as nats.go's
// Msg.Metadata counts them); anything else is left to Metadata.
func TestAckFields_BothFormsOfTheAckSubject(t *testing.T) {
	for _, tc := range []struct {
		reply            string
		seq, pending, ts uint64
	}{
		{"$JS.ACK.KV_b.c1.1.42.7.1764136319531135645.99", 42, 99, 1764136319531135645},
		{"$JS.ACK.KV_b.c1.1.42.7.1764136319531135645.0", 42, 0, 1764136319531135645},
		{"$JS.ACK._.acchash.KV_b.c1.1.42.7.1764136319531135645.99.rnd", 42, 99, 1764136319531135645},
		{"$JS.ACK.dom.acchash.KV_b.c1.3.18446744073709551.1.5.0", 18446744073709551, 0, 5},
		{"$JS.ACK.dom.acchash.KV_b.c1.3.18.1.5.7.tok.more", 18, 7, 5},
	} {
		seq, ts, pending, ok := ackFields(tc.reply)
		if !ok || seq != tc.seq || uint64(ts) != tc.ts || pending != tc.pending {
			t.Errorf("ackFields(%s) = %d, %d, %d, %v; want %d, %d, %d", tc.reply, seq, ts, pending, ok, tc.seq, tc.ts, tc.pending)
		}
	}
	for _, reply := range []string{
		"", "_INBOX.x", "$JS.ACK.KV_b.c1.1.42.7.17.99.x", // ten tokens: neither form
		"$JS.ACK.KV_b.c1.1.42.7.99", "$JS.ACK.KV_b.c1.1.4x.7.17.99", "$JS.ACK.KV_b.c1.1.42.7.17.",
		"$JS.ACK.KV_b.c1.1.42.7.99999999999999999999.0", // more digits than a uint64 holds
	} {
		if _, _, _, ok := ackFields(reply); ok {
			t.Errorf("ackFields(%q) took it", reply)
		}
	}
}
