package sink

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/setting"
)

// HTTP is the HTTP sink: it sends each job as a request shaped by its
// configuration (method, URL, body encoding, headers, auth) and by the
// job's own request parts within the configuration's bounds, and
// classifies the answer. Build one with NewHTTP and Close it when done. It
// is safe for concurrent use.
type HTTP struct {
	rt       gatedTransport // no http.Client: no redirect is followed, and none of its per-request work is needed
	endpoint endpoint
	bounds   *Bounds
	headers  http.Header
	timeout  time.Duration
	now      func() time.Time
}

var _ Sender = (*HTTP)(nil)

// maxDrain is how much of an answer's body is read, past what is kept, so
// that the connection can be reused; a longer body closes the connection.
const maxDrain = 64 << 10

// NewHTTP returns an HTTP sink for cfg. It applies SetDefaults to a copy of
// cfg and returns Validate's error, if any, wrapping ErrInvalidConfig.
//
// The sink has its own connection pool of cfg.MaxInFlight connections to
// the provider over HTTP/1.1, and follows no redirect. A request that goes
// through no proxy is written and its answer read on the caller's
// goroutine (see direct); one through a proxy (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY) goes through net/http's transport.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sink: new http sink: %w", err)
	}
	ep, _ := parseEndpoint(cfg.URL) // checked by Validate
	bounds, err := NewBounds(cfg)
	if err != nil {
		return nil, fmt.Errorf("sink: new http sink: %w", err)
	}
	h := &HTTP{
		endpoint: ep,
		bounds:   bounds,
		headers:  make(http.Header, len(cfg.Headers)+2),
		timeout:  cfg.Timeout,
		now:      cfg.Now,
	}
	h.headers.Set("User-Agent", "sluice")
	for k, v := range cfg.Headers {
		h.headers.Set(k, v)
	}
	auth, err := cfg.Auth.header()
	if err != nil {
		return nil, fmt.Errorf("sink: new http sink: %w", setting.Errorf(ErrInvalidConfig, cfg.Auth.secretKey(), "%v", err))
	}
	if auth != "" {
		h.headers.Set("Authorization", auth)
	}
	dial := (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	spares := newSpares(cfg.MaxInFlight)
	// One TLS config for both ways to the provider: the sink's own TLS
	// dial, and the TLS net/http runs inside a proxy's tunnel.
	tlsConfig := &tls.Config{RootCAs: cfg.rootCAs}
	transport := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           spares.gatedDial(dial),
		DialTLSContext:        spares.gatedDialTLS(dial, tlsConfig, cfg.Timeout),
		TLSClientConfig:       tlsConfig,
		MaxIdleConns:          cfg.MaxInFlight,
		MaxIdleConnsPerHost:   cfg.MaxInFlight,
		MaxConnsPerHost:       cfg.MaxInFlight,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ExpectContinueTimeout: time.Second,
	}
	h.rt = gatedTransport{next: newDirect(transport, cfg.MaxInFlight), spares: spares}
	return h, nil
}

// Send sends j to the provider and classifies the answer as the package
// documentation says. The request's method is j.Request.Method, else
// sink.method (POST); its URL sink.url (or j.Request.URL) extended by
// j.Request.Path and j.Request.Query; its body j.Payload in the configured
// encoding (none for GET and DELETE). Its headers are sink.headers,
// j.Request.Headers, the Authorization of sink.auth, Content-Type (from
// the encoding), Idempotency-Key (j.Key, else j.ID), X-Sluice-Job-Id,
// X-Sluice-Lane, X-Sluice-Attempt and, when j.EnqueuedAt is set,
// X-Sluice-Enqueued-At (RFC 3339 with nanoseconds). A job outside the
// bounds (Bounds.Check) is not sent: Send returns an ErrPermanent error
// naming the field, so that the job is dead-lettered with that reason.
// The request is bounded by the configured Timeout and by ctx. Neither
// the payload, the URL's credentials nor the auth secret ever appear in
// the error.
//
// The gate that ctx may carry (WithGate) runs before the request is handed
// to the transport, and again on the connection right before the
// request's first byte is written: when it refuses, nothing is sent and
// Send returns its error (ErrLate from the dispatch engine), which matches
// none of ErrThrottled, ErrTransient and ErrPermanent. A new connection to
// the provider, when one is needed, is opened after the first run; a
// refusal at write time closes the connection it was to be written on.
// The hold that ctx may carry (WithHold) runs at write time only, before
// the gate: the request is built and its connection taken before its
// moment, and it leaves the instant the hold ends.
func (h *HTTP) Send(ctx context.Context, j *queue.Job) error {
	if j == nil {
		return fmt.Errorf("%w: nil job", ErrPermanent)
	}
	t, err := h.bounds.target(j)
	if err != nil {
		return outOfBounds(j, err)
	}
	reqCtx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	req, err := h.newRequest(reqCtx, j, t)
	if err != nil {
		return err
	}
	// Straight to the transport: http.Client would copy the headers for
	// redirects it is not to follow (10 of a send's 56 allocations).
	resp, err := h.rt.RoundTrip(req)
	if gerr, ok := refused(err); ok {
		return fmt.Errorf("sink: %s %s: not sent: %w", t.method, t.redacted, gerr)
	}
	if err != nil {
		return h.requestError(ctx, reqCtx, t, err)
	}
	defer func() {
		_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
		_ = resp.Body.Close()
	}()
	return h.classify(resp)
}

func (h *HTTP) newRequest(ctx context.Context, j *queue.Job, t target) (*http.Request, error) {
	// A bodiless request gets an empty body that net/http cannot rewind
	// (not http.NoBody): net/http sends no body for a GET or DELETE whose
	// body reads nothing, and does not write it a second time after a
	// reused connection broke, as it would a request without a body (see
	// gatedTransport: at most once per slot).
	var body io.Reader = io.NopCloser(bytes.NewReader(nil))
	var contentType string
	if hasBody(t.method) {
		b, ct, err := h.bounds.body(j)
		if err != nil {
			return nil, outOfBounds(j, err)
		}
		body, contentType = bytes.NewReader(b), ct
	}
	req, err := http.NewRequestWithContext(ctx, t.method, t.url, body)
	if err != nil {
		return nil, fmt.Errorf("%w: build request to %s: %v", ErrPermanent, t.redacted, err)
	}
	req.Header = make(http.Header, len(h.headers)+len(t.header)+perJobHeaders)
	for k, v := range h.headers {
		req.Header[k] = v // shared with every request: never changed
	}
	for k, v := range t.header {
		req.Header[k] = v
	}
	key := j.Key
	if key == "" {
		key = j.ID
	}
	// The per-job values share one backing array: one allocation, not
	// one per header (Header.Set's).
	vals := make([]string, 0, perJobHeaders)
	set := func(name, value string) {
		if value != "" {
			vals = append(vals, value)
			req.Header[name] = vals[len(vals)-1 : len(vals) : len(vals)]
		}
	}
	set("Content-Type", contentType)
	set(HeaderIdempotencyKey, key)
	set(HeaderJobID, j.ID)
	set(HeaderLane, j.Lane)
	set(HeaderAttempt, strconv.Itoa(j.Attempt))
	if !j.EnqueuedAt.IsZero() {
		set(HeaderEnqueuedAt, j.EnqueuedAt.UTC().Format(time.RFC3339Nano))
	}
	if u := h.endpoint.user; u != nil && t.own && req.Header.Get("Authorization") == "" {
		pass, _ := u.Password()
		req.SetBasicAuth(u.Username(), pass)
	}
	return req, nil
}

// perJobHeaders is how many headers newRequest sets per job at most.
const perJobHeaders = 6

// requestError turns a failed round trip into a transient error: the
// caller's ctx ended, the request's timeout passed, or the connection
// failed. The message names the URL without its credentials.
func (h *HTTP) requestError(ctx, reqCtx context.Context, t target, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w: %s %s: cancelled: %w", ErrTransient, t.method, t.redacted, ctx.Err())
	case errors.Is(reqCtx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: %s %s: no answer within %s: %w", ErrTransient, t.method, t.redacted, h.timeout, context.DeadlineExceeded)
	}
	// *url.Error quotes the URL; keep only what it wraps (a dial or
	// protocol error, which names host:port at most).
	if uerr, ok := errors.AsType[*url.Error](err); ok {
		err = uerr.Err
	}
	return fmt.Errorf("%w: %s %s: %w", ErrTransient, t.method, t.redacted, err)
}

// Close closes the sink's idle connections. Sends in flight finish; the
// sink can still be used, opening new connections.
func (h *HTTP) Close() error {
	h.rt.CloseIdleConnections()
	return nil
}

// Holds reports true: Send runs Hold right before the request's first byte.
func (h *HTTP) Holds() bool { return true }

// String describes the sink without credentials: "http POST http://host/path".
func (h *HTTP) String() string { return "http " + h.bounds.method + " " + h.endpoint.redacted }

// Bounds returns what the sink lets a job choose of its request.
func (h *HTTP) Bounds() *Bounds { return h.bounds }
