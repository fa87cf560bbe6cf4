package kvserver

// Dialable is dialable, for its test.
func Dialable(u string) string { return dialable(u) }
