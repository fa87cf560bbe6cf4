package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
)

// procID names this process uniquely within a run: its pid and its start
// time (in clock ticks since boot, /proc/self/stat's 22nd field). A pid
// alone does not: a run that starts thousands of commands wraps pid_max
// (32768 by default) within minutes, and a later command given an earlier
// one's pid would be taken for it. Where the start time cannot be read, a
// random suffix stands in for it.
func procID() string {
	pid := os.Getpid()
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		if id, ok := procIDFromStat(pid, string(stat)); ok {
			return id
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strconv.Itoa(pid) + "-r" + hex.EncodeToString(b[:])
}

// procIDFromStat is pid@starttime read from the text of /proc/PID/stat. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses of its own, so the fields are counted from the last ')'.
func procIDFromStat(pid int, stat string) (string, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(stat[i+1:]) // from field 3, the state
	const startTime = 22 - 3
	if len(fields) <= startTime {
		return "", false
	}
	if _, err := strconv.ParseUint(fields[startTime], 10, 64); err != nil {
		return "", false
	}
	return strconv.Itoa(pid) + "@" + fields[startTime], true
}
