package sink

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"time"
)

// spareAge is how long a connection a refusal left clean is kept for the
// next dial before it is closed: short, because net/http retries nothing
// on a connection it takes as new, and a server may close one it has had
// idle a while (a connection found closed is never handed out: alive).
const spareAge = 2 * time.Second

// spares keeps the connections to the provider that a request refused at
// its write left clean, for the transport's next dial.
//
// A gate that refuses at write time fails the write, and net/http closes
// a connection whose write failed, though nothing of the request went
// out. Without spares each such refusal costs a new connection to the
// provider (at the ceiling, where a loaded replica refuses about one
// request in ten, 50 to 110 connections per 1,000 jobs; over TLS a
// handshake each). With them the connection is handed to the next dial
// instead: the provider sees no new connection.
type spares struct {
	mu   sync.Mutex
	max  int                 // connections kept at most, for all addresses
	age  time.Duration       // how long one is kept (spareAge; tests shorten it)
	idle map[string][]*spare // by dial key, newest last
}

// spare is one kept connection and the timer that closes it at spareAge.
type spare struct {
	c     net.Conn
	timer *time.Timer
}

// newSpares keeps up to max connections, each for spareAge.
func newSpares(max int) *spares {
	return &spares{max: max, age: spareAge, idle: map[string][]*spare{}}
}

// put keeps c for key, or closes it when the pool is full.
func (s *spares) put(key string, c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lenLocked() >= s.max {
		_ = c.Close()
		return
	}
	sp := &spare{c: c}
	sp.timer = time.AfterFunc(s.age, func() { s.expire(key, sp) })
	s.idle[key] = append(s.idle[key], sp)
}

// lenLocked is how many connections are kept, for all addresses. s.mu
// must be held.
func (s *spares) lenLocked() int {
	n := 0
	for _, l := range s.idle {
		n += len(l)
	}
	return n
}

// expire closes sp unless get took it first.
func (s *spares) expire(key string, sp *spare) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.remove(key, sp) {
		_ = sp.c.Close()
	}
}

// remove takes sp out of key's list, reporting whether it was there.
func (s *spares) remove(key string, sp *spare) bool {
	l := s.idle[key]
	for i, x := range l {
		if x == sp {
			s.idle[key] = append(l[:i], l[i+1:]...)
			return true
		}
	}
	return false
}

// get returns the newest connection kept for key that is still open, or
// nil. Those found closed by the server are closed and dropped.
func (s *spares) get(key string) net.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for l := s.idle[key]; len(l) > 0; l = s.idle[key] {
		sp := l[len(l)-1]
		s.idle[key] = l[:len(l)-1]
		sp.timer.Stop()
		if alive(sp.c) {
			return sp.c
		}
		_ = sp.c.Close()
	}
	return nil
}

// close closes every connection kept now (HTTP.Close: the sink stays
// usable, and keeps what later refusals leave, each for its time).
func (s *spares) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, l := range s.idle {
		for _, sp := range l {
			sp.timer.Stop()
			_ = sp.c.Close()
		}
		delete(s.idle, key)
	}
}

// dialFunc is the shape of http.Transport's DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// gatedDial returns the transport's DialContext: a connection kept in s
// for addr, else a new one from dial (see keptOr).
func (s *spares) gatedDial(dial dialFunc) dialFunc { return s.keptOr("", dial) }

// gatedDialTLS returns the transport's DialTLSContext: as gatedDial, over
// a TLS connection that this dial opens and shakes hands on (config
// cloned, with the address's host as ServerName when it has none), so
// that the gate sits above TLS and a refused request leaves the TLS
// connection itself clean for the next dial. net/http uses it for HTTPS
// requests that go through no proxy.
func (s *spares) gatedDialTLS(dial dialFunc, config *tls.Config, handshake time.Duration) dialFunc {
	return s.keptOr("tls|", func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := config.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		hctx, cancel := context.WithTimeout(ctx, handshake)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return tc, nil
	})
}

// keptOr returns a dial that hands out the connection s keeps for the
// address (under prefix, which keeps TLS connections apart from plain
// ones), else a new one from dial, wrapped in a gateConn that runs the
// request's gate at its first write and goes back to s when a refusal
// left it clean.
func (s *spares) keptOr(prefix string, dial dialFunc) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		key := prefix + network + "|" + addr
		c := s.get(key)
		if c == nil {
			var err error
			if c, err = dial(ctx, network, addr); err != nil {
				return nil, err
			}
		}
		return newGateConn(c, s, key), nil
	}
}
