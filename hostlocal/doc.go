// Package hostlocal is baton's host-local layer: host identity, a private
// state directory, non-blocking flock gates with holder metadata, process
// identity that a recycled pid cannot fool, and pid files.
//
// What it guarantees: a gate gives mutual exclusion among the processes of
// ONE host, and only on a LOCAL filesystem; on NFS and other network
// filesystems flock may be emulated, local to one client or absent, so a
// state directory must never live there. The kernel releases a gate when its
// holder dies, so a crashed holder never blocks anyone; the holder metadata
// written into the gate file (pid, host, purpose, since) is informational and
// never decides who holds the gate. A Process is a pid plus a start token, so
// a pid that the kernel recycled for another program is not mistaken for the
// original.
//
// What it does not guarantee: anything across hosts (that is the job of the
// layers above, on the KV substrate), or that the holder of a gate is still
// doing what its Purpose says. A gate whose holder died keeps that holder's
// metadata in its file, which is how Locks reports it as orphaned; taking the
// gate again (TryLock) or ClearOrphan clears the mark. Gate files are never
// unlinked while in use: unlinking a flocked file is the classic race that
// leaves two processes holding locks on two different inodes.
//
// Linux is the main platform and macOS is supported. On other systems the
// operations that need flock or process start times return an error wrapping
// ErrUnsupported.
//
// The package knows nothing of sessions, leases or NATS.
package hostlocal
