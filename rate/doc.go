// Package rate gives a fleet rate limiters shared across hosts: at most N
// (plus a burst) in any window of a period, by the server's clock, for
// every limit of a limiter at once (50 requests and 40,000 tokens a
// minute, say).
//
// A limiter is one record, rate.<name> in the JetStream KV bucket
// <prefix>-limits, holding its limits, which never change once written,
// and the takes it admitted within its longest period, each with the
// server's time of the write that admitted it. A take is admitted by a
// compare-and-set of that record: the taker decides from the record as it
// read it, at that record's server time (or the server's time now, read
// when a take does not fit), and the compare-and-set makes sure no other
// take came between. So every window of a limit's period that ends at an
// admitted take holds only takes the record showed and that take, and
// their cost is within the limit: exact across hosts, with no clock of
// any client deciding anything. Limiters.Take reads the record first; a
// Handle (Open) keeps the record it last wrote or read, so an uncontended
// take is one compare-and-set. The server tells a writer no time: a
// Handle decides at a lower bound of the server's clock and stamps its own
// takes with an upper bound, from the clock read every 2 s with a drift
// allowance of 500 ppm, so its takes may count a few round trips longer
// than exact, never shorter.
//
// A refused take (Take, or a TakeWait that gives up) publishes a notice on
// limits.RefusalSubject with its cost, which the dashboard counts: no
// write and no round trip; fire and forget.
//
// Guaranteed: in any window of a limit's period, the admitted cost (or
// count, for a limit per take) is at most Max + Burst, judged by the
// server's times of the admitting writes; a refused take is told how long
// until it would fit, if nothing else is admitted meanwhile. Settle
// changes an admitted take's cost after the fact.
//
// Not guaranteed: that the server's clock never steps back (in a cluster,
// a new stream leader's clock judges from then on: NTP-synced servers
// differ by milliseconds); that a Handle's host's monotonic clock runs
// within 500 ppm of the leader's, which its bounds assume; that a taker
// that waits for RetryAfter is the next admitted (waiters are not served
// in order); that a settled take that cost more than its reservation
// leaves its windows within the limit.
package rate
