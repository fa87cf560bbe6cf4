package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// streams are baton's buckets' streams.
var streams = []string{"KV_baton-sessions", "KV_baton-leases", "KV_baton-queues", "KV_baton-limits"}

// faultKind is one kind of server or network fault the schedule injects;
// run injects it, waits out its duration and heals it.
type faultKind struct {
	name  string
	needs string // "net": the network namespaces; "disk": the servers' tmpfs (mountDisks)
	run   func(h *harness, ctx context.Context) error
}

var faultKinds = []faultKind{
	{"server_sigkill_stream_leader", "", func(h *harness, ctx context.Context) error { return h.killServer(ctx, true) }},
	{"server_sigkill", "", func(h *harness, ctx context.Context) error { return h.killServer(ctx, false) }},
	{"partition_stream_leader", "net", (*harness).partitionLeader},
	{"partition_2_1", "net", (*harness).partitionSplit},
	{"isolate_host", "net", (*harness).isolateHost},
	{"link_flap", "net", (*harness).flapLink},
	{"slow_latency", "", func(h *harness, ctx context.Context) error {
		return h.toxic(ctx, "latency", fmt.Sprintf(`{"latency":%d,"jitter":%d}`, 100+h.intn(300), 50+h.intn(100)), h.between(8*time.Second, 12*time.Second))
	}},
	{"slow_latency_over_margin", "", func(h *harness, ctx context.Context) error {
		return h.toxic(ctx, "latency", fmt.Sprintf(`{"latency":%d,"jitter":%d}`, 1500+h.intn(1000), h.intn(300)), h.between(8*time.Second, 12*time.Second))
	}},
	{"slow_bandwidth", "", func(h *harness, ctx context.Context) error {
		return h.toxic(ctx, "bandwidth", fmt.Sprintf(`{"rate":%d}`, 2+h.intn(14)), h.between(8*time.Second, 12*time.Second))
	}},
	{"slow_reset_connections", "", func(h *harness, ctx context.Context) error {
		// Every connection that carries data is reset (TCP RST) at once or
		// within 200 ms, again and again: the clients reconnect, and lose
		// the answers in flight.
		return h.toxic(ctx, "reset_peer", fmt.Sprintf(`{"timeout":%d}`, h.intn(200)), h.between(4*time.Second, 8*time.Second))
	}},
	{"slow_stall", "", func(h *harness, ctx context.Context) error {
		// Data stops both ways, as over a dead link: the slow host is cut
		// off for longer than any TTL of its holders.
		h.isolated(slowHost)
		return h.toxic(ctx, "timeout", `{"timeout":0}`, runTTL+h.between(2*time.Second, 4*time.Second))
	}},
	{"full_disk", "disk", (*harness).fullDisk},
}

// faultSchedule injects one server or network fault after another, each
// kind in turn (in a shuffled order per round), with a pause between them
// and the cluster healthy again before the next.
func (h *harness) faultSchedule(ctx context.Context) error {
	var kinds []faultKind
	for _, k := range faultKinds {
		if k.needs == "" || k.needs == "net" && h.net.on || k.needs == "disk" && h.stats.diskSkipped == "" {
			kinds = append(kinds, k)
		}
	}
	defer h.serverKillGaps()
	for round := 0; ; round++ {
		order := slices.Clone(kinds)
		h.mu.Lock()
		h.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		if round == 0 {
			// The full disk comes in the first round's first half: a run of
			// make fault's length may not finish a round.
			if i := slices.IndexFunc(order, func(k faultKind) bool { return k.needs == "disk" }); i >= len(order)/2 {
				j := h.rng.IntN(len(order) / 2)
				order[i], order[j] = order[j], order[i]
			}
		}
		h.mu.Unlock()
		for _, k := range order {
			if !sleep(ctx, h.between(4*time.Second, 8*time.Second)) {
				return nil
			}
			h.logf("fault %s", k.name)
			if err := k.run(h, ctx); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
			h.stats.fault(k.name)
			h.waitHealthy(context.Background())
		}
	}
}

// killServer SIGKILLs the server leading one of the streams (or the next
// server in turn) and restarts it 2-6 s later.
func (h *harness) killServer(ctx context.Context, leader bool) error {
	h.mu.Lock()
	k := h.killCount
	h.killCount++
	h.mu.Unlock()
	i := k % len(h.cl.nodes)
	if leader {
		name, err := h.cl.leaderOf(ctx, streams[k%len(streams)])
		if j := h.cl.index(name); err == nil && j >= 0 {
			i = j
		}
	}
	at := time.Now()
	h.cl.kill(i)
	h.mu.Lock()
	h.kills = append(h.kills, at)
	h.mu.Unlock()
	h.stats.serverKilled(h.cl.nodes[i].name)
	down := h.between(2*time.Second, 6*time.Second)
	h.logf("SIGKILL server %s, restart in %s", h.cl.nodes[i].name, down)
	time.Sleep(down)
	if err := h.cl.start(context.Background(), i); err != nil {
		return fmt.Errorf("restart %s: %w", h.cl.nodes[i].name, err)
	}
	return nil
}

// serverKillGaps measures, for each server SIGKILL, the time to the first
// acknowledged session write and the longest gap in a leader's writes.
func (h *harness) serverKillGaps() {
	h.mu.Lock()
	kills := slices.Clone(h.kills)
	h.mu.Unlock()
	for _, at := range kills {
		if d, ok := h.stats.firstWriteAfter(at); ok {
			h.stats.mu.Lock()
			h.stats.recovery = append(h.stats.recovery, d)
			h.stats.mu.Unlock()
		}
		var worst time.Duration
		to := at.Add(30 * time.Second)
		if now := time.Now(); now.Before(to) {
			to = now
		}
		for _, key := range leadKeys {
			worst = max(worst, h.chk.longestGap("lead/"+key, at, to))
		}
		h.stats.mu.Lock()
		h.stats.leadGaps = append(h.stats.leadGaps, worst)
		h.stats.mu.Unlock()
	}
}

// partitionLeader cuts the server leading one of the streams off from the
// other two, with one client host on its side, for 10-15 s.
func (h *harness) partitionLeader(ctx context.Context) error {
	name, err := h.cl.leaderOf(ctx, streams[h.intn(len(streams))])
	if err != nil || h.cl.index(name) < 0 {
		name = serverNames[h.intn(len(serverNames))]
	}
	return h.split(ctx, name, h.between(10*time.Second, 15*time.Second))
}

// partitionSplit cuts any one server and one client host off from the
// other two servers and hosts, for 8-12 s.
func (h *harness) partitionSplit(ctx context.Context) error {
	return h.split(ctx, serverNames[h.intn(len(serverNames))], h.between(8*time.Second, 12*time.Second))
}

// split makes the minority {server, one partitionable host} and the
// majority {the other servers and host}, for d.
func (h *harness) split(ctx context.Context, server string, d time.Duration) error {
	host := h.pickIsolatable()
	var minority, majority []string
	minority = []string{server, host}
	for _, n := range append(slices.Clone(serverNames), partitionable...) {
		if n != server && n != host {
			majority = append(majority, n)
		}
	}
	h.logf("partition %v | %v for %s", minority, majority, d)
	h.isolated(host)
	defer h.serverCut(time.Now())
	if err := h.net.cut(minority, majority); err != nil {
		return err
	}
	sleep(ctx, d)
	return h.net.heal(minority, majority)
}

// serverCut records that a server was cut off from the majority from
// start until now: a stream leader among them may have answered reads from
// its last state meanwhile (adr/0015), so the linearizability check leaves
// reads answered then out. The window runs on for as long as a stale
// leader may go on answering: it gives its leadership up only after it has
// lacked a quorum for 10 s, checked every 10 s, and after a heal a stalled
// route connection resumes only on TCP's next retransmission. So the
// window ends 10 s after the heal, and no sooner than 20 s after the cut.
func (h *harness) serverCut(start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := time.Now().Add(10 * time.Second)
	if min := start.Add(20 * time.Second); end.Before(min) {
		end = min
	}
	h.cuts = append(h.cuts, span{start, end})
}

// partitionable are the hosts whose namespace links are cut (the slow host
// reaches the servers through the harness's proxies instead).
var partitionable = []string{"h1", "h2"}

// isolateHost cuts a client host (one whose process holds a slot or leads,
// when there is one) off from every server for longer than its holders'
// TTL.
func (h *harness) isolateHost(ctx context.Context) error {
	host := h.pickIsolatable()
	d := runTTL + h.between(2*time.Second, 4*time.Second)
	h.logf("isolate %s for %s", host, d)
	h.isolated(host)
	if err := h.net.cut([]string{host}, serverNames); err != nil {
		return err
	}
	sleep(ctx, d)
	return h.net.heal([]string{host}, serverNames)
}

// flapLink takes one member's link down and up every 200-800 ms for 6-10 s.
func (h *harness) flapLink(ctx context.Context) error {
	all := append(slices.Clone(serverNames), partitionable...)
	name := all[h.intn(len(all))]
	until := time.Now().Add(h.between(6*time.Second, 10*time.Second))
	h.logf("flap %s", name)
	if slices.Contains(serverNames, name) {
		defer h.serverCut(time.Now())
	}
	up := true
	for time.Now().Before(until) && ctx.Err() == nil {
		up = !up
		if err := h.net.setLink(name, up); err != nil {
			return err
		}
		time.Sleep(h.between(200*time.Millisecond, 800*time.Millisecond))
	}
	return h.net.setLink(name, true)
}

// toxic puts a toxic on the slow host's links for d.
func (h *harness) toxic(ctx context.Context, kind, attrs string, d time.Duration) error {
	name, err := h.px.add(kind, attrs)
	if err != nil {
		return err
	}
	h.logf("toxic %s %s on %s's links for %s", kind, attrs, slowHost, d)
	sleep(ctx, d)
	h.px.remove(name)
	return nil
}

// pickIsolatable picks a partitionable host, preferring one with a holder.
func (h *harness) pickIsolatable() string {
	var with []string
	for _, host := range partitionable {
		if len(h.holdersOn(host)) > 0 {
			with = append(with, host)
		}
	}
	if len(with) > 0 {
		return with[h.intn(len(with))]
	}
	return partitionable[h.intn(len(partitionable))]
}

// holding is a daemon whose command was writing as the holder when its host
// was cut off.
type holding struct {
	actor, key, host string
	fence            uint64
	at               time.Time
	d                *daemon
}

// holdersOn lists the daemons on host whose command wrote in the last 500
// ms, with the largest fence each wrote with.
func (h *harness) holdersOn(host string) []holding {
	h.mu.Lock()
	var ds []*daemon
	for d := range h.daemons {
		if d.host == host && d.key != "" && d.alive() {
			ds = append(ds, d)
		}
	}
	h.mu.Unlock()
	sortDaemons(ds)
	var out []holding
	for _, d := range ds {
		if last, fence := h.chk.lastWrite(d.actor, math.MaxUint64); fence > 0 && time.Since(last) < 500*time.Millisecond {
			out = append(out, holding{actor: d.actor, key: d.key, host: host, fence: fence, at: time.Now(), d: d})
		}
	}
	return out
}

// isolated notes the holders on host as it is cut off from the servers: each
// must stop acting under its fence before the next holder's first accepted
// write (checkIsolations).
func (h *harness) isolated(host string) {
	hs := h.holdersOn(host)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cutOff = append(h.cutOff, hs...)
}

// checkIsolations runs once every daemon has stopped: a holder cut off from
// the servers whose command still acted under its fence after another
// holder's first accepted write under a larger one was not stopped by its
// local deadline in time. Holders that a client fault paused or killed are
// left out (a paused process may act late: that is what fences are for).
func (h *harness) checkIsolations() (checked map[string]int) {
	checked = map[string]int{}
	h.mu.Lock()
	list := slices.Clone(h.cutOff)
	h.mu.Unlock()
	for _, c := range list {
		if c.d.faulted() {
			continue
		}
		next, nextFence, ok := h.chk.firstAbove(c.key, c.fence, c.at)
		if !ok {
			continue // nobody took over (the cut was shorter than the TTL)
		}
		checked[c.d.verb]++
		if last, _ := h.chk.lastWrite(c.actor, c.fence); last.After(next) {
			h.stats.violation("%s on %s, cut off from the servers at %s, acted under fence %d until %s, after the next holder's first accepted write (fence %d) at %s",
				c.actor, c.host, c.at.Format("15:04:05.000"), c.fence, last.Format("15:04:05.000"), nextFence, next.Format("15:04:05.000"))
		}
	}
	return checked
}

// waitHealthy waits (up to 60 s) until every stream has a leader and every
// replica is current, so that faults do not pile up.
func (h *harness) waitHealthy(ctx context.Context) {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if h.healthy(ctx) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	h.logf("the cluster is not healthy 60 s after a fault; going on")
}

func (h *harness) healthy(ctx context.Context) bool {
	nc, err := nats.Connect(h.cl.urls(), nats.Timeout(2*time.Second))
	if err != nil {
		return false
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return false
	}
	for _, name := range streams {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(sctx, name)
		cancel()
		if err != nil {
			return false
		}
		ci := s.CachedInfo().Cluster
		if ci == nil || ci.Leader == "" || len(ci.Replicas) < len(h.cl.nodes)-1 {
			return false
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return false
			}
		}
	}
	return true
}
