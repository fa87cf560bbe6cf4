// Package web is baton's dashboard: a live view of a cluster's sessions,
// leaders and their candidates, leases, queues, limits (semaphores with
// their holders and lines, rate limiters with their use), path
// reservations (each space's holders and line) and the doctor's findings,
// its JSON API (/api/v1/, in the shapes of the CLI's --json), an event
// stream of changes (server-sent events, fed by KV watches) and Prometheus
// metrics of the whole cluster (/metrics).
//
// What it guarantees: what it shows comes from watches of the buckets, so a
// change reaches a browser within one watch delivery and one event batch
// (50 ms), never by polling KV; the badge of a leader moves only when the
// lease does, never on a click. Every action (hand leadership over, resign,
// a doctor fix, cancel, retry or release in a queue) is a call of the
// library, CAS-gated as the CLI's, asked by POST only, refused across
// origins, refused in read-only mode, and logged. Record fields are
// untrusted and are only ever rendered as text.
//
// What it does not guarantee: a row's age and time left are counted from
// the server's time as this process estimates it (within a round trip);
// queues are read again when they change, at most once a second (less often
// when a read is slow), so their counts can lag a second behind the tasks.
// A semaphore is read again at most four times a second while it changes.
// A reservation space is one record, which the watch brings whole; a
// reservation shown expired has passed its TTL by the server's clock as
// estimated, though no write has dropped it yet.
// A rate limiter's admitted takes are counted from its record as the watch
// delivers it, and its refusals from the notices takers send
// (limits.RefusalSubject), which are fire and forget: both count from the
// dashboard's start, and a notice lost with a connection is not counted.
// The doctor's summary is at most 30 seconds old; it checks the sessions
// the watch holds (no second listing of the bucket), so it sees them as the
// page does.
//
// Metrics never carry a label per slot, session, task, lease or permit:
// their labels are state, kind, reason, priority, queue, bucket, server,
// sem, limiter, limit, space, mode and agent key (with the leader's instance and host
// on one info series per key). Agent keys are capped (WithMaxAgentKeys,
// default 1000; beyond that agents are counted, not labelled), and so are
// semaphores, limiters and reservation spaces, by the same number.
package web
