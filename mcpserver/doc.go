// Package mcpserver serves baton to coding agents over the Model Context
// Protocol: `baton mcp` runs it on stdio, as a child of the agent's MCP
// client, so it lives exactly as long as the agent.
//
// Tools: claim_slot, heartbeat, release_slot, who_holds, list_sessions,
// acquire_lease, release_lease, leader, acquire_permit, release_permit,
// sem_status, take_rate, rate_status, doctor (report only), queue_add, queue_status and queue_get; and a resource, baton://status (the
// `baton status --json` document), whose subscribers are told when it
// changes. Each tool takes arguments checked against its input schema and
// answers with
// structured JSON (matching its output schema) and a one-line summary. A
// refusal, a lost slot or an unreachable server is a tool result with
// isError set, saying what happened and what to do next; the server keeps
// running.
//
// What it guarantees: a slot claimed through the server is recorded with
// the agent's process (the server's parent) as its holder, so same-host
// takeover and `baton doctor` see the agent, not the server; it is renewed
// in the background on the schedule `baton run` uses, with no call from
// the agent; and when the client disconnects (its end of stdio closes), every
// slot the server holds is closed with result "fail", and every lease
// released, before Serve returns. Leases are held (and renewed) the same
// way, as an instance of the agent's process. A slot or lease lost while
// held (expired, closed elsewhere, taken with --force) is reported in the
// next tool result (lost_slots, lost_leases), on the log (WithLog) and as a
// logging notification to a client that set a log level.
//
// What it does not: a server killed outright (SIGKILL) closes nothing; its
// slots expire by their TTL, or are free at once to a join on the same
// host once the agent's process is gone. Losing a slot stops nothing: the
// agent must stop working on it.
package mcpserver
