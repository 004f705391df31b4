package sink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// A provider that reads a request and then drops the connection without an
// answer gets that request once: the transport may not write it again on
// the same slot (net/http would, for a request with an Idempotency-Key on
// a reused connection). The job fails as a transient error, to be retried
// on a slot of its own.
func TestWrittenOncePerSend(t *testing.T) {
	var arrivals atomic.Int64
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if arrivals.Add(1) == 2 { // the second request: read, then hang up
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h := newSink(t, HTTPConfig{URL: p.URL + "/send"})
	var gates atomic.Int64
	ctx := WithGate(context.Background(), func() error { gates.Add(1); return nil })
	job := func(id string) *queue.Job {
		return &queue.Job{ID: id, Payload: json.RawMessage(`{}`)}
	}
	if err := h.Send(ctx, job("a")); err != nil { // opens the connection the next request reuses
		t.Fatal(err)
	}
	err := h.Send(ctx, job("b"))
	if !errors.Is(err, ErrTransient) {
		t.Errorf("send on a connection dropped after the request: got %v, want a transient error", err)
	}
	if n := arrivals.Load(); n != 2 {
		t.Errorf("the provider got %d requests for 2 sends, want 2: one send, one request", n)
	}
	if n := gates.Load(); n != 4 {
		t.Errorf("gate ran %d times, want 4: at the hand-over and at the write, for each send", n)
	}
}

// The gate runs again on the connection, right before the request's first
// byte: a request that passed at the hand-over to the transport but is
// late by the time it would be written is not written, on a new
// connection as on a reused one, with a body or without, and the sink
// sends the next request normally.
func TestGateRefusesAtWrite(t *testing.T) {
	var arrivals atomic.Int64
	p := newProvider(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		arrivals.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	pass := WithGate(context.Background(), func() error { return nil })
	// passOnce passes its first run (the hand-over) and refuses the next
	// (the write), as a slot that expires while the request waits would.
	passOnce := func(runs *atomic.Int64) context.Context {
		return WithGate(context.Background(), func() error {
			if runs.Add(1) == 1 {
				return nil
			}
			return ErrLate
		})
	}
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		t.Run(method, func(t *testing.T) {
			h := newSink(t, HTTPConfig{URL: p.URL + "/send", Method: method})
			job := &queue.Job{ID: "j", Payload: json.RawMessage(`{"to":"+1"}`)}
			for _, conn := range []string{"new connection", "reused connection"} {
				if conn == "reused connection" {
					if err := h.Send(pass, job); err != nil { // leaves an idle connection
						t.Fatal(err)
					}
				}
				before := arrivals.Load()
				var runs atomic.Int64
				err := h.Send(passOnce(&runs), job)
				if !errors.Is(err, ErrLate) {
					t.Errorf("%s: send refused at write: got %v, want ErrLate", conn, err)
				}
				if n := arrivals.Load() - before; n != 0 {
					t.Errorf("%s: the provider got %d requests for a send refused at write, want 0", conn, n)
				}
				if n := runs.Load(); n != 2 {
					t.Errorf("%s: gate ran %d times, want 2: at the hand-over, and once at the write", conn, n)
				}
			}
			before := arrivals.Load()
			if err := h.Send(pass, job); err != nil {
				t.Fatalf("send after a refusal at write: %v", err)
			}
			if n := arrivals.Load() - before; n != 1 {
				t.Errorf("the provider got %d requests for one send after a refusal, want 1", n)
			}
		})
	}
}

// The hold runs on the connection, right before the request's first byte,
// and the gate after it: the request is built and its connection opened
// while the hold waits, and nothing reaches the provider until the hold
// ends. A hold that refuses writes nothing and its error comes back.
func TestHoldWaitsAtTheWire(t *testing.T) {
	accepted := make(chan struct{}, 8)
	var arrivals atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		arrivals.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	h := newSink(t, HTTPConfig{URL: srv.URL + "/send"})
	if !h.Holds() {
		t.Fatal("the HTTP sink does not hold; want a Holder")
	}
	job := &queue.Job{ID: "j", Payload: json.RawMessage(`{"to":"+1"}`)}
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	holding, release := make(chan struct{}), make(chan struct{})
	gated := WithGate(context.Background(), func() error { note("gate"); return nil })
	ctx := WithHold(gated, func() error { note("hold"); close(holding); <-release; return nil })
	done := make(chan error, 1)
	go func() { done <- h.Send(ctx, job) }()
	bound := time.After(10 * time.Second)
	select {
	case <-holding:
	case <-bound:
		t.Fatal("the hold did not run within 10s")
	}
	select {
	case <-accepted:
	case <-bound:
		t.Fatal("no connection reached the provider while the hold waited: the hold ran before the dial")
	}
	if n := arrivals.Load(); n != 0 {
		t.Errorf("the provider got %d requests while the hold waited, want 0", n)
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("send after the hold: %v", err)
		}
	case <-bound:
		t.Fatal("the send did not end within 10s of the hold's end")
	}
	if n := arrivals.Load(); n != 1 {
		t.Errorf("the provider got %d requests for one send, want 1", n)
	}
	mu.Lock()
	got := strings.Join(order, " ")
	mu.Unlock()
	if want := "gate hold gate"; got != want {
		t.Errorf("ran %q, want %q: the gate at the hand-over, then the hold and the gate at the write", got, want)
	}

	refusing := WithHold(gated, func() error { return ErrLate })
	if err := h.Send(refusing, job); !errors.Is(err, ErrLate) {
		t.Errorf("send with a refusing hold: got %v, want ErrLate", err)
	}
	if n := arrivals.Load(); n != 1 {
		t.Errorf("the provider got %d requests after a refusing hold, want still 1", n)
	}
}
