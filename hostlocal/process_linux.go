//go:build linux

package hostlocal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// bootID reads the kernel's boot id once: it is fixed until the next boot,
// and with the start time it makes a token that stays unique across reboots.
var bootID = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("hostlocal: boot id: %w", err)
	}
	id := string(bytes.TrimSpace(b))
	if id == "" {
		return "", errors.New("hostlocal: boot id: /proc/sys/kernel/random/boot_id is empty")
	}
	return id, nil
})

func lookupProcess(pid int) (Process, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			// /proc may hide the process (hidepid) or not be this pid
			// namespace's: ask the kernel whether the pid exists at all.
			// EPERM means it exists and belongs to another user.
			switch kerr := unix.Kill(pid, 0); kerr {
			case nil, unix.EPERM:
				return Process{PID: pid}, nil
			case unix.ESRCH:
				return Process{}, noProcess(pid)
			}
		}
		return Process{}, fmt.Errorf("hostlocal: read process %d: %w", pid, err)
	}
	state, start, err := parseStat(string(data))
	if err != nil {
		return Process{}, fmt.Errorf("hostlocal: process %d: %w", pid, err)
	}
	switch state {
	case "Z", "X", "x": // zombie, dead
		return Process{}, fmt.Errorf("%w: pid %d exited (state %s)", ErrNoProcess, pid, state)
	}
	boot, err := bootID()
	if err != nil {
		return Process{}, err
	}
	return Process{PID: pid, Start: boot + ":" + start}, nil
}

// parseStat returns the state (field 3) and the start time in clock ticks
// since boot (field 22) of a /proc/<pid>/stat line. The command name
// (field 2, in parentheses) may itself hold spaces and ')', so the fields
// are counted from the LAST ')'.
func parseStat(line string) (state, start string, err error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return "", "", fmt.Errorf("malformed stat line %q: no command name", line)
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(line[i+1:])
	const startField = 22
	if len(fields) < startField-2 {
		return "", "", fmt.Errorf("malformed stat line %q: %d fields after the command name", line, len(fields))
	}
	start = fields[startField-3]
	if _, err := strconv.ParseUint(start, 10, 64); err != nil {
		return "", "", fmt.Errorf("malformed stat line: start time: %w", err)
	}
	return fields[0], start, nil
}

func thisBoot(start string) bool {
	boot, err := bootID()
	return err == nil && len(start) > len(boot) && start[len(boot)] == ':' && strings.HasPrefix(start, boot)
}

// parentPID is the parent of pid (field 4 of /proc/<pid>/stat).
func parentPID(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("hostlocal: read process %d: %w", pid, err)
	}
	line := string(data)
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, fmt.Errorf("hostlocal: process %d: malformed stat line %q", pid, line)
	}
	fields := strings.Fields(line[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("hostlocal: process %d: malformed stat line %q", pid, line)
	}
	return strconv.Atoi(fields[1])
}
