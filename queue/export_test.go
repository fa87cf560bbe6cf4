package queue

import "time"

// SharedEndWatches is how many queues q's handle shares a watch of for
// AddWait now; SetEndWatchIdle shortens how long one outlives its waits.
func SharedEndWatches(qs *Queues) int {
	qs.ends.mu.Lock()
	defer qs.ends.mu.Unlock()
	return len(qs.ends.byQueue)
}

func SetEndWatchIdle(qs *Queues, d time.Duration) {
	qs.ends.mu.Lock()
	defer qs.ends.mu.Unlock()
	qs.ends.idle = d
}
