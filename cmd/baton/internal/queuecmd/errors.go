package queuecmd

import "errors"

// errNotRecorded is a standby whose process could not be recorded in the
// task's key lock: the command is not started (and no other standby is
// tried, as it is when a standby died while it waited).
var errNotRecorded = errors.New("the command's process could not be recorded in the task's key lock")
