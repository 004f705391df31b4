package sink

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

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
