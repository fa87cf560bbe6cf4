// Package lease gives a key one holder at a time, with a fence, and elects
// one leader among the instances that share an agent key.
//
// A lease is a record in the JetStream KV bucket <prefix>-leases that lives
// while its holder renews it and vanishes when its TTL runs out on the
// server's clock. Acquire is a compare-and-set create; every renewal,
// release and handover is a compare-and-set on the revision the holder
// knows, so a holder that lost its lease can never overwrite, renew or
// release its successor's.
//
// Guaranteed: at most one holder per key at any revision; the fence (the
// revision at which the holder got the lease) is strictly larger for every
// later holder; a holder learns it lost its lease no later than a local
// deadline that falls before the server could give the lease to anyone else
// (Done closes then), or at once when the KV watch shows it deleted, expired
// or taken. A waiting acquirer is woken by the watch, not by polling, and
// waiters are served in the order they began to wait where the server has
// the limits bucket (adr/0040).
//
// Not guaranteed: that a holder still holds its lease while it works. A
// paused process (GC, SIGSTOP, a suspended laptop) can resume after its
// lease expired and act before it notices. Work that must never be done by a
// former holder has to carry the fence to where it lands, and that resource
// must refuse a fence lower than the highest it has seen. A partitioned
// minority cannot renew: its holders give up at their deadline.
//
// Election builds on leases: every instance registers a candidacy (a lease
// of its own), the leader holds the lease leader.<agent-key>, followers are
// woken when it goes, a same-host follower takes over at once when the
// leader's processes are dead, and leadership can be handed to a named
// instance with no moment without a leader. Election.Lead is the loop a
// program embeds: it runs the work while this instance leads, stops it when
// the term ends, hands over when asked and campaigns again.
package lease
