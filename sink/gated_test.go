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
	if n := gates.Load(); n != 2 {
		t.Errorf("gate ran %d times, want 2", n)
	}
}
