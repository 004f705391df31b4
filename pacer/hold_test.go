package pacer

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// TakeAhead hands a slot over up to ahead before it comes, and Hold waits
// for it: the caller prepares its request in between, and never holds a
// slot that has come and gone. Take (ahead 0) hands it over when it comes.
func TestTakeAheadThenHold(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	// 5 slots/s: the third slot falls 400ms after the first, far more than
	// a claim takes on the slowest machine.
	p := newClientPacer(t, srv, Config{Name: "ahead", Rate: 5, Burst: 1, Horizon: time.Second, Headroom: -1})
	ctx := context.Background()
	s, err := p.TakeAhead(ctx, 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Now(); !got.Before(s.At) {
		t.Errorf("TakeAhead returned %s after its slot; want before it (ahead 1h)", got.Sub(s.At))
	}
	if err := p.Hold(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got := time.Now(); got.Before(s.At) {
		t.Errorf("Hold returned %s before the slot; want at or after it", s.At.Sub(got))
	}

	next, err := p.Take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Now(); got.Before(next.At) {
		t.Errorf("Take returned %s before its slot; want at or after it", next.At.Sub(got))
	}
	if !next.At.After(s.At) {
		t.Errorf("the next slot is at %s, the held one at %s; want a later one", next.At, s.At)
	}

	cancelled, cancel := context.WithCancel(ctx)
	s, err = p.TakeAhead(ctx, 1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := p.Hold(cancelled, s); err == nil && time.Now().Before(s.At) {
		t.Error("Hold on an ended context returned nil before the slot; want its error")
	}
}
