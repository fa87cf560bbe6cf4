// Package kv is baton's substrate: NATS JetStream key-value buckets used as
// a small, strongly ordered store of ownership records.
//
// What it guarantees: every write that decides ownership is a compare-and-set
// on the key's last revision (Create, Update and Delete never overwrite
// blindly); reads that decide ownership are answered by the stream leader, so
// a replica that lags cannot show a stale owner; a revision mismatch is
// re-read from the leader before it is reported, so a timed-out write that
// did land is not mistaken for a loss; and a replicated stream's refusal of a
// compare-and-set while an earlier write of the same key is still being
// applied (error 10164, which says nothing of the key's revision) is sent
// again until the call's deadline, then reported as ErrUnavailable, never as
// a conflict. Revisions are the stream sequence: they only grow, across deletes,
// expiry, restarts and leader changes, which makes them usable as fences.
// Pipeline sends many such writes without waiting for each answer: the
// stream applies them in the order given, each settled as its own call
// would be (a write sent again in settling may land behind later ones).
//
// What it does not guarantee: a key outlives its TTL only while someone
// renews it, and the server, not the client, decides when it expires (on a
// 250 ms tick, so a key can remain visible a few hundred milliseconds past its
// deadline). With the default lazy fsync an operating-system crash or power
// loss can lose acknowledged writes; run the server with sync always when that
// matters. A client's clock plays no part in any decision here.
//
// On a cluster, a request whose answer will not come does not wait out its
// attempt's timeout (half the client's timeout): when the connection is
// lost, when the server announces lame-duck mode (Connect's connection then
// moves at once to another server it knows) and when the stream of a
// bucket the client handles elects a new leader (a leader that steps down
// or stops drops the requests it holds, unanswered), the call sends the
// request again at once, to whichever server answers now. A write re-reads
// first, as after any lost answer, so it is never applied twice nor
// reported wrongly. A read answered "temporarily unavailable" (503: its
// stream, or the meta group for a bucket's information, between leaders) is
// asked again after a short pause, until the call's deadline; a write so
// answered is sent again too, and from then on treated as possibly applied,
// since the leader that answered may have proposed it to its successor.
//
// HandOff prepares a planned stop of a server (`baton up` calls it on
// SIGTERM). When it returns without error, another server with a current
// copy leads each of the given buckets' streams, and enough other copies
// are current for each stream to commit without the stopping server: its
// stop starts no election, which would pause the stream's writes for
// seconds. It does not make the stop invisible: a request in flight at the
// old leader is sent again (a round trip), a new leader can take a few
// hundred milliseconds to serve under load, and the JetStream meta
// leadership (creating buckets and watches) moves without being waited
// for. It protects nothing against a crash, a stop without it, or a second
// server stopped before the first is back, after which the stream has no
// quorum until it is.
//
// Keys carry their own TTL (the per-message TTL of JetStream, whole seconds,
// at least one second); renewals keep it because Update republishes it with
// the CAS header. Deletes leave a tombstone that carries an optional note and
// itself expires after the bucket's marker TTL, and the server writes an
// expiry marker when a key's TTL runs out, so a watcher can tell a delete
// (OpDelete) from an expiry (OpExpire). Buckets keep one revision per key;
// a handle that has seen that (Ensure, LearnHistory) deletes without a
// rollup, which the server would answer by walking every watch of the
// bucket, and any other handle rolls up, in case the history was raised by
// hand (adr/0038).
//
// The package connects to servers with URLs, credentials, TLS and nats CLI
// contexts (Connect). It does not link nats-server: the embedded server
// (`baton up`, every test) is package kvserver, so that a client process
// pays nothing for it at start-up (ADR 0030).
//
// A user needs no more permissions than the subjects of its buckets: for a
// bucket B, publish to $KV.B.>, $JS.API.STREAM.INFO.KV_B,
// $JS.API.STREAM.MSG.GET.KV_B, $JS.API.CONSUMER.CREATE.KV_B.>,
// $JS.API.CONSUMER.DELETE.KV_B.> and $JS.FC.KV_B.>, and subscribe to its
// reply inbox (WithInboxPrefix); Ensure and Apply also need $JS.API.INFO and
// $JS.API.STREAM.CREATE.KV_B or $JS.API.STREAM.UPDATE.KV_B, and HandOff
// $JS.API.STREAM.LEADER.STEPDOWN.KV_B. A call the server refuses fails at
// once with ErrPermission. On a cluster, a user that may also subscribe to
// $JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.KV_B hears of its stream's new
// leaders; one that may not works as before (the refusal is not passed on),
// but a request dropped by an old leader waits out its attempt's timeout.
package kv
