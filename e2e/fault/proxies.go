package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// slowHost is the client host whose every connection to the servers goes
// through a toxiproxy proxy in the harness (one per server), so that its
// links can be slowed, throttled, stalled and reset while the others' stay
// clean.
const slowHost = "h3"

// proxies are the slow host's links: one toxiproxy proxy per server,
// listening in the harness's namespace.
type proxies struct {
	mu      sync.Mutex
	list    []*toxiproxy.Proxy
	counter int
}

// newProxies starts one proxy per upstream (host:port), listening on
// listenHost.
func newProxies(listenHost string, upstreams []string) (*proxies, error) {
	// The toxics log through zerolog's global logger; the run's output is
	// the harness's own.
	zerolog.SetGlobalLevel(zerolog.ErrorLevel)
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := &proxies{}
	for i, up := range upstreams {
		px := toxiproxy.NewProxy(srv, fmt.Sprintf("n%d", i+1), listenHost+":0", up)
		if err := px.Start(); err != nil {
			p.stop()
			return nil, fmt.Errorf("toxiproxy for %s: %w", up, err)
		}
		p.list = append(p.list, px)
	}
	return p, nil
}

// urls is the client URL list through the proxies.
func (p *proxies) urls() string {
	var us []string
	for _, px := range p.list {
		us = append(us, "nats://"+px.Listen)
	}
	return strings.Join(us, ",")
}

// add puts a toxic of type kind with attrs on every proxy, both ways; it
// returns the toxic's name for remove.
func (p *proxies) add(kind string, attrs string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counter++
	name := fmt.Sprintf("%s-%d", kind, p.counter)
	for _, px := range p.list {
		for _, stream := range []string{"upstream", "downstream"} {
			body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name+"-"+stream, kind, stream, attrs)
			if _, err := px.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
				return "", fmt.Errorf("toxic %s on %s: %w", body, px.Name, err)
			}
		}
	}
	return name, nil
}

// remove takes the toxic name off every proxy.
func (p *proxies) remove(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.list {
		for _, stream := range []string{"upstream", "downstream"} {
			_ = px.Toxics.RemoveToxic(context.Background(), name+"-"+stream)
		}
	}
}

func (p *proxies) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, px := range p.list {
		px.Stop()
	}
}
