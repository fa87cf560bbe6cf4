package kvtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// StallProxy forwards TCP connections to a server on loopback and can
// stall them: data stops both ways while every connection stays open, as
// over a link that went dead (no reset, no close: the client notices only
// by its own timeouts).
type StallProxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	closed  bool
	stalled bool
	resume  chan struct{} // closed by Resume
	conns   []net.Conn
	wg      sync.WaitGroup
}

// NewStallProxy listens on a free loopback port and forwards to upstream
// (host:port); it stops when the test ends.
func NewStallProxy(tb testing.TB, upstream string) *StallProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("stall proxy: %v", err)
	}
	p := &StallProxy{ln: ln, upstream: upstream, resume: make(chan struct{})}
	close(p.resume)
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p
}

// URL is the proxy's address as a NATS URL.
func (p *StallProxy) URL() string { return "nats://" + p.ln.Addr().String() }

// Stall stops every byte both ways until Resume.
func (p *StallProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stalled {
		p.stalled, p.resume = true, make(chan struct{})
	}
}

// Resume lets data through again.
func (p *StallProxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled {
		p.stalled = false
		close(p.resume)
	}
}

// gate returns the channel to wait on before forwarding.
func (p *StallProxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resume
}

func (p *StallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			u.Close()
			return
		}
		p.conns = append(p.conns, c, u)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies from src to dst, holding each chunk while the proxy stalls.
func (p *StallProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				src.Close()
			}
			return
		}
	}
}

// close stops listening, lets stalled data go and closes every connection.
func (p *StallProxy) close() {
	p.ln.Close()
	p.Resume()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
