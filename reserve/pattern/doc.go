// Package pattern reads the path patterns of reservations and decides,
// exactly, whether two of them overlap.
//
// A pattern is a path relative to a space's root (a repository), its
// segments separated by '/'. In a segment, '*' matches any run of
// characters (none included) and '?' exactly one; a segment that is
// exactly "**" matches any number of whole segments, none included. A
// "**" inside a segment with other characters acts as '*'. Every other
// character stands for itself, '[' and '{' included (app/[id]/page.tsx is
// a plain path); there is no escape, since a wildcard covers the literal
// character anyway.
//
// A pattern covers every path it matches and everything beneath such a
// path: src and src/ reserve the directory and all under it, src/*.go
// covers src/a.go (and src/a.go/x, which no file system holds). Two
// patterns overlap if some path is covered by both.
//
// Parse normalises: a leading "./", repeated and trailing slashes and "."
// segments go; a pattern that is empty after that ("." or "./") is the
// whole space, "**". It refuses an empty pattern, an absolute path, a
// ".." segment, a backslash, control characters, invalid UTF-8, more than
// 1024 bytes and more than 64 segments.
//
// Guaranteed: Overlaps is exact and symmetric: it is true if and only if
// a path covered by both patterns exists (checked against a brute-force
// search in the package's tests and fuzz target), so it never answers "no
// overlap" where two reservations meet. Covers is exact likewise. Both
// are safe for concurrent use. Overlaps walks both patterns once and
// allocates nothing: tens of nanoseconds for typical patterns, at most
// about half a millisecond for two segments of a thousand characters
// built to be slow; Covers allocates only for patterns of more than 16
// segments.
package pattern
