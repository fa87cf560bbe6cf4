package main

import "testing"

// The verdict counts the garbage over the queue's records by record.
func TestQueueGarbage_CountsByRecord(t *testing.T) {
	got := queueGarbage(map[string]int{"garbage_queue_token_random": 2, "garbage_queue_token_foreign_no_ttl": 1,
		"garbage_queue_worker_ghost_no_ttl": 1, "garbage_queue_inbox_truncated": 3, "garbage_record": 9, "full_disk": 1})
	if want := "queue records garbaged: 7 (config 0, token 3, task 0, key lock 0, worker 1, inbox 3)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
