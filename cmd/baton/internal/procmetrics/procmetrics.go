// Package procmetrics is the --metrics of one baton process that holds
// something: `baton lead`, `baton run` and `baton queue work` serve their
// Prometheus metrics on --metrics ADDR (path /metrics).
//
// They are this process's own view: how long its renewals take and how
// many fail, whether it leads and how often that changed, how its queue
// tasks ended. The cluster-wide view (every session, leader and queue) is
// the dashboard's /metrics (`baton ui`); the NATS server's own monitoring
// is `baton up --http`.
//
// Labels are bounded: kind is one of a fixed set, agent_key is the one key
// a lead campaigns for, queue the one queue a worker serves, outcome and
// reason fixed sets. No label names a slot, task or instance, but
// baton_process_info's instance (one series per process).
//
// This package is what the verbs share: the flag, its check, the label
// values and Start. The metrics themselves (client_golang) are package
// prom, which only the full program links; the client program passes a
// command line with --metrics to the full program (ADR 0030).
package procmetrics

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/queue"
)

// The kinds of renewal (the kind label).
const (
	KindSession   = "session"   // baton run's session
	KindLeader    = "leader"    // baton lead's leadership lease
	KindCandidacy = "candidacy" // baton lead's candidacy
	KindTask      = "task"      // a queue task's key lock and capacity token
)

// Why a term ended (baton_leadership_lost_total's reason).
const (
	LostExpired  = "lost"     // not renewed in time, taken or deleted
	LostHandover = "handover" // handed to another candidate (transfer, preference)
	LostExit     = "exit"     // the command ended: leadership handed on or released
)

// Start serves a process's metrics on addr when it is not empty (through
// f.ServeMetrics), and sets f.RenewHook to count the renewals of the
// sessions, leases and queues f makes next, labelled by kind(key), one of
// kinds. Without addr it returns metrics that record nothing and a stop
// that does nothing. In the client program, which has no f.ServeMetrics,
// an addr passes the whole command line to the full program (f.Full):
// call Start before anything else the verb does.
func Start(ctx context.Context, f *cmdutil.Factory, verb, addr string, kind func(key string) string, kinds ...string) (cmdutil.ProcessMetrics, func(), error) {
	if addr == "" {
		return none{}, func() {}, nil
	}
	if f.ServeMetrics != nil {
		return f.ServeMetrics(ctx, f, verb, addr, kind, kinds...)
	}
	if f.Full != nil {
		return nil, nil, f.Full()
	}
	return nil, nil, errors.New("--metrics: this program serves no metrics; run the baton that `make build` writes")
}

// none records nothing: a process without --metrics.
type none struct{}

func (none) Watch(string)                  {}
func (none) Gained(string)                 {}
func (none) Lost(string, string)           {}
func (none) Serving(string)                {}
func (none) TaskEvent(string, queue.Event) {}

// Kind returns a kind function that names every key kind; pass kind as
// Start's kinds too.
func Kind(kind string) func(string) string { return func(string) string { return kind } }

// Outcome is the outcome label of an ended attempt: its reason, with an
// exit split into success and failure.
func Outcome(ev queue.Event) string {
	if ev.Reason != queue.ReasonExit {
		return ev.Reason
	}
	if ev.ExitCode != nil && *ev.ExitCode == 0 {
		return "success"
	}
	return "failure"
}

// AddFlag adds --metrics to fs, into addr.
func AddFlag(fs *pflag.FlagSet, addr *string) {
	fs.StringVar(addr, "metrics", "", "serve this process's Prometheus metrics on HOST:PORT at /metrics (renewal latency and failures, leadership, task outcomes); port 0 picks one and prints it on stderr")
}

// CheckAddr refuses an address that is not HOST:PORT (exit 2).
func CheckAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n uint64
		n, err = strconv.ParseUint(port, 10, 16)
		if err == nil && port != strconv.FormatUint(n, 10) {
			err = errors.New("not a port number")
		}
	}
	if err != nil {
		return cmdutil.Usagef("--metrics %q: want HOST:PORT, e.g. 127.0.0.1:9464 (port 0 picks a free one)", addr)
	}
	return nil
}
