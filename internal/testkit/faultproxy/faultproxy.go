// Package faultproxy is a TCP proxy for tests that puts faults between a client and a real server
// (PostgreSQL, Redis): it cuts every connection, as a crashed server or a failover does, or stalls
// them, as a partition does. It listens on a free loopback port and stops, closing everything, when
// the test ends.
//
// It is part of this repository's shared test infrastructure, internal/testkit, published as a
// module of its own so that the nested modules' tests (pgstore, redisstore, examples, benchmarks)
// never import the root module's internal/: that would tie each of them to one commit of the root.
package faultproxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a TCP proxy between a client and a real server that a test can break the way networks
// and servers break. Stall delivers no byte in either direction while every connection stays open (a
// partition, a hung server); Resume ends it and closes the connections that tried to send meanwhile,
// whose bytes are lost, as a long partition leaves them, while idle ones carry on. A statement sent
// during a stall therefore never runs, not even after Resume. Cut closes every connection and refuses
// new ones until Restore (a restart, a failover).
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	stalled bool
	cut     bool
	closed  bool
	pairs   map[*pair]struct{}
}

// pair is one client connection and its upstream.
type pair struct {
	client, upstream net.Conn
	broken           bool // lost bytes to a stall; guarded by the proxy's mu
	once             sync.Once
}

func (c *pair) kill() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.upstream.Close()
	})
}

// Start listens on 127.0.0.1:0 and forwards to target (host:port); when t ends it closes the
// proxy and every connection and waits for its goroutines.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, target: target, pairs: map[*pair]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// HostPort returns the proxy's host and port.
func (p *Proxy) HostPort() (string, uint16) {
	a := p.ln.Addr().(*net.TCPAddr)
	return a.IP.String(), uint16(a.Port)
}

// Stall stops every byte; see Proxy.
func (p *Proxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// Resume forwards again and closes the connections that lost bytes to the stall.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.stalled = false
	var broken []*pair
	for c := range p.pairs {
		if c.broken {
			broken = append(broken, c)
		}
	}
	p.mu.Unlock()
	for _, c := range broken {
		c.kill()
	}
}

// Cut closes every connection and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	pairs := make([]*pair, 0, len(p.pairs))
	for c := range p.pairs {
		pairs = append(pairs, c)
	}
	p.mu.Unlock()
	for _, c := range pairs {
		c.kill()
	}
}

// Restore accepts connections again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		refuse := p.cut
		p.mu.Unlock()
		if refuse {
			_ = client.Close()
			continue
		}
		upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &pair{client: client, upstream: upstream}
		p.mu.Lock()
		if p.cut || p.closed { // cut while dialling
			p.mu.Unlock()
			c.kill()
			continue
		}
		p.pairs[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() {
			var dirs sync.WaitGroup
			dirs.Go(func() { p.pipe(c, c.upstream, c.client) })
			dirs.Go(func() { p.pipe(c, c.client, c.upstream) })
			dirs.Wait()
			p.mu.Lock()
			delete(p.pairs, c)
			p.mu.Unlock()
		})
	}
}

// pipe copies src to dst until either fails. It keeps reading while stalled, so that it sees src
// end, and drops what it reads then, marking the pair broken under the same lock Resume reads it by.
func (p *Proxy) pipe(c *pair, dst, src net.Conn) {
	defer c.kill()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.stalled
			if drop {
				c.broken = true
			}
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}
