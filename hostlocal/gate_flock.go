//go:build linux || darwin

package hostlocal

import (
	"errors"
	"io"
	"io/fs"

	"golang.org/x/sys/unix"
)

// The gate layer works on raw descriptors rather than *os.File: an *os.File
// that became unreachable would be closed by its finalizer and silently
// release the gate, while a raw descriptor stays held until Unlock or the
// process's exit.

// filePerm is the mode of a gate file (pid files get it from os.CreateTemp).
const filePerm = 0o600

// openGate opens (or, with create, creates with mode 0600) the gate file at
// path for reading and writing. The descriptor is close-on-exec, so a child
// started while the gate is held does not inherit it and cannot keep the
// gate held after this process is gone.
func openGate(path string, create bool) (int, error) {
	// O_NOFOLLOW: a symbolic link planted at the gate's path would have
	// baton lock, truncate and write the file it points to.
	flags := unix.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	if create {
		flags |= unix.O_CREAT
	}
	for {
		fd, err := unix.Open(path, flags, filePerm)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ELOOP {
			return -1, symlinkError(path)
		}
		if err != nil {
			return -1, &fs.PathError{Op: "open", Path: path, Err: err}
		}
		return fd, nil
	}
}

// tryFlock takes a flock on fd without blocking: exclusive, or shared when
// exclusive is false. It returns false, nil when another open file
// description holds a conflicting lock.
func tryFlock(fd int, exclusive bool) (bool, error) {
	how := unix.LOCK_SH | unix.LOCK_NB
	if exclusive {
		how = unix.LOCK_EX | unix.LOCK_NB
	}
	for {
		err := unix.Flock(fd, how)
		switch {
		case err == nil:
			return true, nil
		case err == unix.EINTR:
			continue
		case errors.Is(err, unix.EWOULDBLOCK):
			return false, nil
		default:
			return false, err
		}
	}
}

// truncateFD empties the file behind fd.
func truncateFD(fd int) error {
	for {
		err := unix.Ftruncate(fd, 0)
		if err == unix.EINTR {
			continue
		}
		return err
	}
}

// writeAtZero writes b at offset 0 of fd in one call.
func writeAtZero(fd int, b []byte) error {
	for {
		n, err := unix.Pwrite(fd, b, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n != len(b) {
			return io.ErrShortWrite
		}
		return nil
	}
}

// readFD reads the file behind fd from offset 0, at most max bytes.
func readFD(fd int, max int) ([]byte, error) {
	var out []byte
	chunk := make([]byte, 4096)
	for len(out) < max {
		n, err := unix.Pread(fd, chunk[:min(len(chunk), max-len(out))], int64(len(out)))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		out = append(out, chunk[:n]...)
	}
	return out, nil
}

// fileSize returns the size of the file behind fd.
func fileSize(fd int) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Size, nil
}

// closeFD closes fd, which releases any flock held through it.
func closeFD(fd int) error {
	// close is not retried on EINTR: on Linux and macOS the descriptor is
	// gone either way.
	return unix.Close(fd)
}
