package queue

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid means bad input: a queue name, key, id, priority, label,
	// duration or option that is not usable. The message says the rule.
	ErrInvalid = errors.New("queue: invalid input")

	// ErrQueueNotFound means the queue has no config record: it was never
	// created (see Queues.Create).
	ErrQueueNotFound = errors.New("queue: no such queue")

	// ErrQueueExists means Create found the queue already there with
	// another config.
	ErrQueueExists = errors.New("queue: queue exists")

	// ErrScheduleNotFound means the queue has no schedule of that name.
	ErrScheduleNotFound = errors.New("queue: no such schedule")

	// ErrScheduleExists means AddSchedule found a schedule of that name
	// with other settings.
	ErrScheduleExists = errors.New("queue: schedule exists")

	// ErrTaskNotFound means the queue has no task with that id (never added,
	// or finished longer ago than the queue's retention).
	ErrTaskNotFound = errors.New("queue: no such task")

	// ErrState means the task is in a state the operation does not apply
	// to (retrying a done task, cancelling a finished one). Returned wrapped
	// in a *StateError.
	ErrState = errors.New("queue: task is not in a state for this")

	// ErrStateMoved means a bulk Cancel or Retry (IfState) found a task no
	// longer in the state it was listed in: it was left alone. It is
	// returned beside ErrState, in a *StateError.
	ErrStateMoved = errors.New("queue: task moved on since it was listed")

	// ErrHeld means a key lock is held by a live holder and release was not
	// forced. Returned wrapped in a *HeldError.
	ErrHeld = errors.New("queue: key lock is held")

	// ErrUndecodable means a record does not decode. A task record that does
	// not decode is never run; a config that does not decode keeps a worker
	// from starting (a running one keeps the last config that decoded).
	ErrUndecodable = errors.New("queue: record does not decode")

	// ErrNoTask means a worker limited to one task (WithMaxTasks) found none
	// within its wait (WithIdleTimeout).
	ErrNoTask = errors.New("queue: no task came")

	// ErrStartFailed means a handler could not start its task's work (a
	// command that cannot be executed). The task goes back to pending, its
	// attempt not counted, and the worker stops.
	ErrStartFailed = errors.New("queue: the task's work could not start")
)

// Why a running task was stopped before its handler returned on its own:
// context.Cause of the handler's context wraps one of these.
var (
	// ErrLockLost: the key lock or capacity token was lost (deleted,
	// expired, taken) or could not be renewed before the local deadline.
	ErrLockLost = errors.New("queue: key lock lost")
	// ErrTimeout: the task ran longer than the queue's timeout.
	ErrTimeout = errors.New("queue: task timed out")
	// ErrCancelled: the task was cancelled (Queues.Cancel).
	ErrCancelled = errors.New("queue: task cancelled")
	// ErrDraining: the worker is stopping and the task did not finish
	// within the grace; it goes back to pending, its attempt not counted.
	ErrDraining = errors.New("queue: worker draining")
	// ErrPathsLost: the reservation of the paths the task touches was lost
	// (expired, released by another, not renewed in time).
	ErrPathsLost = errors.New("queue: the task's paths reservation lost")
)

// StateError says which state made an operation refuse a task.
type StateError struct {
	Queue string
	ID    string
	State State
	// Want says what the operation needs, for the message.
	Want string
	// moved: the task left the states IfState named.
	moved bool
}

func (e *StateError) Error() string {
	return fmt.Sprintf("task %s of queue %s is %s; %s", e.ID, e.Queue, e.State, e.Want)
}

// Unwrap lets errors.Is match ErrState, and ErrStateMoved when the task
// left the states IfState named.
func (e *StateError) Unwrap() []error {
	if e.moved {
		return []error{ErrState, ErrStateMoved}
	}
	return []error{ErrState}
}

// HeldError names the live holder of a key lock that release refused.
type HeldError struct {
	Queue string
	Key   string
	Lock  Lock
}

func (e *HeldError) Error() string {
	l := e.Lock
	s := fmt.Sprintf("key %s of queue %s is held by host %s pid %d (slot %s, fence %d", e.Key, e.Queue, l.Host, l.PID, l.Slot, l.Fence)
	if l.Task != "" {
		s += ", task " + l.Task
	}
	return s + "), which is alive and renewing it"
}

// Unwrap lets errors.Is match ErrHeld.
func (e *HeldError) Unwrap() error { return ErrHeld }
