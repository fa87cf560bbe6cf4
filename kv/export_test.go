package kv

import "context"

// EntriesDecodedInRoom is EntriesDecoded with room for at most room
// entries at first, so that a test can make it take more as they come.
func EntriesDecodedInRoom[T any](ctx context.Context, b *Bucket, pattern string, room int, decode func(Entry) (T, error)) ([]Decoded[T], error) {
	return entriesDecoded(ctx, b, pattern, room, decode)
}

// SortByKey is sortByKey, for its test.
func SortByKey[T any](ds []Decoded[T]) { sortByKey(ds) }

// DropAnswers makes the next n writes of c land on the server but lose
// their answer, as a timed-out request whose write was applied.
func DropAnswers(c *Client, n int32) { c.dropAnswers.Store(n) }

// AnswerUnavailable makes the next n writes of c land on the server but be
// answered 503 (temporarily unavailable), as a leader that lost its
// leadership after proposing a write that its successor then committed.
func AnswerUnavailable(c *Client, n int32) { c.answerUnavailable.Store(n) }

// ReadsUnavailable makes the next n reads of c be answered 503 (temporarily
// unavailable), as while a stream or the meta group elects a leader.
func ReadsUnavailable(c *Client, n int32) { c.readsUnavailable.Store(n) }

// ReadRetries is how many reads c sent again after a transient answer.
func ReadRetries(c *Client) int64 { return c.readRetries.Load() }

// RefuseInProgress makes the next n writes of c be refused, unsent, as a
// replicated stream's leader refuses a key's write while an earlier one is
// in progress.
func RefuseInProgress(c *Client, n int32) { c.inProcess.Store(n) }

// InProgressRetries is how many writes c sent again after such a refusal.
func InProgressRetries(c *Client) int64 { return c.inProcessRetries.Load() }

// AnswerStale makes the next n writes of c land on the server but be
// answered with a deposed leader's refusal (wrong last sequence: 0), as when
// a leader cut off from the others answered first and its successor
// applied the write.
func AnswerStale(c *Client, n int32) { c.answerStale.Store(n) }

// RefuseStale makes the next n writes of c be refused, unsent, with a
// deposed leader's refusal (wrong last sequence: 0).
func RefuseStale(c *Client, n int32) { c.refuseStale.Store(n) }

// InTouch is inTouch, for its test.
func InTouch(st StreamStatus) bool { return inTouch(st) }

// ParsePubAck is parsePubAck, for its tests.
func ParsePubAck(data []byte) (uint64, bool) { return parsePubAck(data) }
