// Package queue runs tasks one key at a time, fairly across keys, within a
// cluster-wide capacity, on workers on any number of hosts.
//
// A queue is a config record and its tasks in the JetStream KV bucket
// <prefix>-queues. Each task has a key (a user, a project); a worker runs a
// task only while it holds the key's lock, which is the session of the
// slot named by the key (session package; <slot_prefix><key>, and
// <slot_prefix><key>.<n> for the further lanes of per_key > 1), and one of
// the queue's max_active capacity tokens, both TTL'd records created by
// compare-and-set and renewed every third of the queue's TTL. So a queued
// task, `baton run` and `baton join` on that slot exclude each other, and
// status and doctor see who works on what.
//
// Guaranteed:
//   - Exclusion: at most per_key tasks of one key hold its locks at once,
//     and a task's work runs only while its worker holds the lock: a worker
//     that loses it (released, expired, taken) stops the work at once, and
//     one whose renewals keep failing stops it before the server could
//     expire the lock (the local deadline of internal/keepalive). Every
//     attempt carries the lock's fence, strictly larger for every later
//     attempt on the key: pass it to what the task writes.
//   - Capacity: at most max_active tasks hold tokens, and a task's work runs
//     only while its token is held, across every worker and host, under
//     races and crashes.
//   - Fairness, across all workers: the highest priority with a task whose
//     key has a free lane goes first; among keys of one priority, the one
//     served least recently; within a key, the order tasks were added. A key
//     whose locks are held is skipped without holding up the others.
//   - No lost task: an added task (Add or AddBatch returned it added) ends done, dead or
//     cancelled, or is pending, failed or active. A worker that dies loses
//     its task at once to a worker on its host (which sees its process and
//     its command gone) and, on other hosts, once its lock expires; the task
//     goes back to pending with its attempt counted, and is dead after
//     max_attempts. A task runs at most once at a time.
//   - Dispatch is driven by watches of the queue and of the locks, never by
//     polling, and picking a task costs O(log keys) whatever waits.
//   - Run-at (WithRunAt, WithDelay): a task does not start before its time
//     by the server's clock (its worker's offset to the server, less half
//     the round trip that measured it); then it takes its fair turn
//     (adr/0047).
//   - Schedules (AddSchedule): each tick's task is added once, by an id
//     made of the schedule and the tick, whatever dispatchers race or
//     crash; late ticks (up to twice the TTL) are all added, missed ones
//     once or not at all (adr/0049).
//   - Rate limits (Config.Rate): no window of the period, ending at any
//     admission's write, admits more than its max, across hosts, by the
//     server's times of the rate record's writes (adr/0052); the same
//     holds for each key under Config.KeyRate or its KeyConfig.Rate, on a
//     record per key (adr/0055).
//   - Pause (Pause, PauseKey): nothing new is claimed once a worker sees
//     its queue's config paused; a key's pause stops the dispatcher's
//     offers of it (adr/0048). Weights and a key's own per_key bias and
//     bound what the round robin picks.
//   - Results (SetResult, ResultFunc): written with the attempt's end, in
//     the same compare-and-set, at most MaxResult bytes (adr/0050).
//   - WithUnique: at most one pending task per key among those added with
//     it (adr/0053). WithAfter: a task runs only once every task it waits
//     for is done, and is cancelled when one is dead or cancelled
//     (adr/0054).
//
// Not guaranteed:
//   - Exactly once. A task whose worker dies, or loses its lock while
//     paused, runs again: at least once, with a larger fence each time.
//   - That a worker holds its lock between two renewals, as for sessions: a
//     paused worker (GC, SIGSTOP) can wake after its lock expired and act
//     before it notices; the fence is what a resource must check.
//   - A start admitted by a rate limit may not be made (its claim lost):
//     it still counts against the window. A key's pause does not stop a
//     claim of an offer made a moment before the dispatcher saw it.
//   - Lowering max_active does not stop running tasks: new ones start only
//     once fewer run. A worker that has not yet seen the lower value (its
//     watch lags by milliseconds) may start one more under the old one.
//   - Fairness between workers that pick at the same instant is settled by
//     the compare-and-set, not by the order: the global order holds up to
//     races of a few milliseconds.
//   - Order across keys of equal service: keys never served go by their
//     oldest task; a key's last service is known while one of its tasks is
//     retained (the queue's retention), after which it counts as never
//     served.
//
// The claim of a task writes three records in an order that any crash can
// stop at without losing the task or leaving a lock for longer than the
// TTL (adr/0020): the key's lock, the token, then the task (pending to
// active). Ending an attempt writes the task first, then frees the lock and
// the token.
//
// The workers of a queue elect one of them its dispatcher (the lease
// election queue.<Q>, with the queue's TTL; adr/0035). It alone watches
// the queue and the locks, keeps the index, puts back tasks whose lock is
// provably gone, and offers each worker what it is to claim through the
// worker's inbox record (<Q>.inbox.<id>); the others watch only their inbox
// and the queue's config, and say they are there with a presence record
// (<Q>.worker.<id>). A worker claims an offer with the same three
// compare-and-sets, so an offer the dispatcher was wrong about loses, as a
// race between workers would, and every guarantee above holds whoever
// dispatches. What a task costs does not grow with the number of workers.
// A dead dispatcher is replaced at once by a worker of its host (which
// waits on its process) and within the TTL by others; the workers of a
// host that share a state directory watch each other's processes and free
// a dead one's locks at once (hostwatch.go).
//
// Also not guaranteed: a cancel request, or a lock lost under a running
// task, reaches a worker that does not dispatch through the dispatcher:
// while a queue has none (between a dispatcher's death and its successor)
// the worker learns of it no sooner. Its own renewals still stop the work
// once its lock is gone.
//
// A worker mostly waits (on the server, and on the work), and its process
// spends less CPU per task on one thread: `baton queue work` sets
// GOMAXPROCS to 1 unless the variable is set (adr/0037). This package
// leaves GOMAXPROCS to the program that embeds it; one whose handlers do
// not need the cores may do the same.
package queue
