// Package reserve gives a fleet path reservations: an agent reserves the
// files and directories it will edit in a space (a repository), shared or
// exclusive, all of its patterns or none, and is told who holds them when
// they are taken.
//
// A space is one record, resv.<space> in the JetStream KV bucket
// <prefix>-limits, holding every reservation held in it and every one
// waiting, in the order they came (adr/0056). Each change (reserve, renew,
// release, take a place in line) rewrites the record by compare-and-set,
// so one write decides a request against every other reservation of the
// space. Each write also drops the reservations expired by the server's
// clock, and those whose holder's process is gone on the writer's host,
// and makes held every waiting reservation now free, in order.
//
// A pattern (package pattern) is a path relative to the space's root with
// *, ? and **; a pattern reserves what it matches and everything beneath.
// Two patterns overlap if some path is covered by both; an exclusive
// reservation clashes with every overlapping one, a shared one with the
// exclusive ones only.
//
// Guaranteed: no two reservations that clash are held at once, by the
// server's clock: each is granted by a write that found nothing in its
// way in the record it replaced, a reservation is held until its TTL runs
// out after its last renewal (by the server's time of the write), and
// only a write decided at a time past that, or on the holder's own host
// once its process is gone, removes it. A request is granted whole or not
// at all. A reservation's fence (the revision that granted it) is higher
// than that of every reservation granted before it in the space; waiters
// granted by one write (a release that frees several) share it, and
// never clash with each other. Waiters
// whose patterns clash are served in the order they began to wait, and a
// request clashing with a waiter is not served before it (no writer
// starves behind a stream of readers); a waiter is woken by the write
// that frees its paths, by its own timer when a reservation in its way
// expires, and by the exit of a holder's process on its host. A holder
// learns it lost its reservation (Done closes) no later than a local
// deadline that falls before the server's clock could let another take
// its paths.
//
// Not guaranteed: that a holder still holds its reservation while it
// works (a paused process can resume after it expired: carry the fence to
// what it writes); that paths are not edited by a process that never
// asked (reservations are advisory: a pre-commit hook running
// baton reserve check makes them binding for commits). A space holds as
// many reservations as fit in one message of the server's (about 3,000
// at the default 1 MB); a fleet larger than that splits its repository
// into spaces, one per top-level directory.
package reserve
