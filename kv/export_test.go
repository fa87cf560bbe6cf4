package kv

// DropAnswers makes the next n writes of c land on the server but lose
// their answer, as a timed-out request whose write was applied.
func DropAnswers(c *Client, n int32) { c.dropAnswers.Store(n) }
