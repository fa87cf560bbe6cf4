// Package doctor finds what is wrong with a baton deployment, as seen from
// one host, and fixes what can be fixed safely.
//
// It reports: buckets missing or configured otherwise than baton expects;
// sessions not renewed for their stale-after window; sessions of this host
// whose process is dead; records that do not decode; host-local gate files
// and pid files left behind by processes that died; and clock skew between
// this host and the server.
//
// Fixes are compare-and-sets on what was observed: a stale session or an
// undecodable record is removed only at the revision the report saw, so one
// renewed between the report and the fix survives. Nothing is removed
// because of a client clock. Sessions of a dead process that are not (yet)
// stale are reported but left alone: the recorded pid may be a wrapper
// shell that exited while the agent still works.
package doctor
