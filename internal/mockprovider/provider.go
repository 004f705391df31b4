package mockprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// jobMethods are the methods the provider takes jobs with, on its path and
// below it.
var jobMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// wantsJSON reports whether r says its body is JSON: a JSON Content-Type,
// or none on a request with a body.
func wantsJSON(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return r.ContentLength != 0
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(strings.ToLower(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// maxBodyBytes bounds a request body; larger ones are answered 413.
const maxBodyBytes = 16 << 20

// shutdownGrace is how long Serve waits for requests in flight (beyond
// Config.Latency) before closing their connections.
const shutdownGrace = 5 * time.Second

// Provider is the mock provider: an http.Handler that records arrivals and
// answers them, and the server around it. Run it with Start (it listens on
// Config.Listen) or Serve (on a listener of yours), or mount Handler in a
// server of your own. All methods are safe for concurrent use.
type Provider struct {
	cfg     Config
	handler http.Handler
	rec     *recorder

	responder atomic.Pointer[Responder] // nil: the seeded shares
	capacity  capacityGate
	open      openRequests

	decideMu sync.Mutex // orders arrivals: seq, clock, answer and record together
	seq      int64
	shares   *shares

	conns atomic.Int64 // connections accepted

	srvMu  sync.Mutex
	addr   net.Addr
	cancel context.CancelFunc
	done   chan error
}

// New checks cfg (after SetDefaults on a copy) and returns a Provider that
// is not yet listening.
func New(cfg Config) (*Provider, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, rec: newRecorder(cfg.MaxArrivals), shares: newShares(cfg)}
	p.capacity.rate = cfg.Capacity
	mux := http.NewServeMux()
	for _, m := range jobMethods {
		mux.HandleFunc(m+" "+cfg.Path, p.serveJob)
		if !strings.HasSuffix(cfg.Path, "/") {
			mux.HandleFunc(m+" "+cfg.Path+"/", p.serveJob) // a job's own path below it
		}
	}
	mux.HandleFunc("GET /report", p.serveReport)
	mux.HandleFunc("GET /arrivals", p.serveArrivals)
	mux.HandleFunc("POST /reset", p.serveReset)
	mux.HandleFunc("POST /capacity", p.serveCapacity)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	p.handler = mux
	return p, nil
}

// Config returns the configuration in use, defaults filled in.
func (p *Provider) Config() Config { return p.cfg }

// Handler returns the provider's handler, to mount in a server of your own.
func (p *Provider) Handler() http.Handler { return p.handler }

// Start listens on Config.Listen and serves in the background until ctx
// ends or Close is called. It returns once the listener is open, so Addr
// and URL are ready.
func (p *Provider) Start(ctx context.Context) error {
	p.srvMu.Lock()
	defer p.srvMu.Unlock()
	if p.done != nil {
		return ErrAlreadyServing
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.cfg.Listen)
	if err != nil {
		return fmt.Errorf("mockprovider: listen: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p.addr, p.cancel, p.done = ln.Addr(), cancel, make(chan error, 1)
	done := p.done
	go func() { done <- p.serve(ctx, ln) }()
	return nil
}

// Close stops the server started by Start, waiting for requests in flight
// to be answered (for a few seconds at most), and returns Serve's error.
func (p *Provider) Close() error {
	p.srvMu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.srvMu.Unlock()
	if done == nil {
		return ErrNotServing
	}
	cancel()
	return <-done
}

// Connections returns how many connections the provider has accepted: a
// client that keeps its connections makes few, one that closes a
// connection per request (or per refused write) makes many.
func (p *Provider) Connections() int64 { return p.conns.Load() }

// Serve serves on ln until ctx ends, then shuts down gracefully and
// returns nil; it returns an error when serving fails. It closes ln.
func (p *Provider) Serve(ctx context.Context, ln net.Listener) error {
	p.srvMu.Lock()
	p.addr = ln.Addr()
	p.srvMu.Unlock()
	return p.serve(ctx, ln)
}

func (p *Provider) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: p.handler, ReadHeaderTimeout: 10 * time.Second, ConnContext: withConn,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				p.conns.Add(1)
			}
		}}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(stampListen(ln)) }()
	select {
	case err := <-errc:
		return fmt.Errorf("mockprovider: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace+p.cfg.Latency)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	<-errc // http.ErrServerClosed
	if err != nil {
		return fmt.Errorf("mockprovider: shutdown: %w", err)
	}
	return nil
}

// Addr returns the address served on, nil before Start or Serve.
func (p *Provider) Addr() net.Addr {
	p.srvMu.Lock()
	defer p.srvMu.Unlock()
	return p.addr
}

// URL returns the URL to configure as sink.url, such as
// "http://127.0.0.1:8080/send"; empty before Start or Serve.
func (p *Provider) URL() string {
	a := p.Addr()
	if a == nil {
		return ""
	}
	return "http://" + a.String() + p.cfg.Path
}

// SetResponder replaces the seeded random choice of answers with r; nil
// restores it.
func (p *Provider) SetResponder(r Responder) {
	if r == nil {
		p.responder.Store(nil)
		return
	}
	p.responder.Store(&r)
}

// Reset forgets every arrival, restarts Seq from 1 and reseeds the random
// choice, so that what follows is answered as by a fresh provider. A
// Responder set with SetResponder stays.
func (p *Provider) Reset() {
	p.decideMu.Lock()
	defer p.decideMu.Unlock()
	p.rec.reset()
	p.seq = 0
	p.shares = newShares(p.cfg)
}

// Arrivals returns a copy of the arrivals kept, oldest first.
func (p *Provider) Arrivals() []Arrival {
	a, _ := p.rec.snapshot()
	return a
}

// Counts returns how many requests arrived and how many distinct jobs (by
// job id, else idempotency key) were answered 2xx, without copying the
// arrivals: cheap enough to poll while the provider is under load. The
// provider remembers at most MaxArrivals delivered jobs, as it keeps at
// most that many arrivals: beyond that many distinct jobs, a 2xx to a job
// it does not remember counts as a new one.
func (p *Provider) Counts() (arrivals int64, delivered int) { return p.rec.counts() }

// Report summarises the arrivals with since <= At < until; a zero since or
// until leaves that end open.
func (p *Provider) Report(since, until time.Time) Report {
	all, dropped := p.rec.snapshot()
	r := Summarize(Between(all, since, until), p.cfg.Cap)
	r.Dropped = dropped
	return r
}

// decide answers and records one arrival that reached the handler at at,
// under one lock so that Seq and the random draws follow the same order.
// At is taken before the lock, so that waiting for it (a reader copying the
// arrivals, say) cannot bunch the recorded times; Seq may then differ from
// the order of At by the few requests that raced, and reports sort by At.
func (p *Provider) decide(r *http.Request, body []byte, at time.Time) (Arrival, Answer) {
	p.decideMu.Lock()
	defer p.decideMu.Unlock()
	p.seq++
	a := arrivalFromRequest(r, at)
	a.Seq, a.BodyBytes = p.seq, len(body)
	jsonBody := json.Valid(body)
	if p.cfg.KeepBodies {
		a.Header = r.Header.Clone()
		if jsonBody {
			a.Body = json.RawMessage(body)
		} else {
			a.RawBody = body
		}
	}
	var ans Answer
	if !jsonBody && wantsJSON(r) {
		ans = Answer{Status: http.StatusBadRequest, Body: `{"error":"body is not valid JSON"}`}
	} else if rp := p.responder.Load(); rp != nil {
		ans = (*rp)(a)
	} else {
		ans = p.shares.answer(a)
	}
	if ans.Status == 0 {
		ans.Status = http.StatusOK
	}
	if ans.Status/100 == 2 && !p.capacity.admit(at) {
		ans = overCapacity()
	}
	if ans.Body == "" {
		ans.Body = defaultBody(ans.Status, a)
	}
	a.Status, a.RetryAfter = ans.Status, max(ans.RetryAfter, 0)
	p.rec.add(a)
	ans.Delay += p.cfg.Latency
	return a, ans
}
