package natsq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// An attached queue uses the streams and consumers the dispatchers made as
// they are: its own configuration (here the defaults) changes neither the
// duplicate window nor the ack wait, and it reports the real ones.
func TestAttachChangesNothing(t *testing.T) {
	srv := testnats.Start(t)
	run := queue.Config{Name: "attach", Lanes: []string{"otp", "bulk"}, VisibilityTimeout: 5 * time.Minute, DedupWindow: time.Hour}
	_, js := open(t, srv.Conn(), run)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	q, err := natsq.New(ctx, js, queue.Config{Name: "attach", Lanes: []string{"otp", "bulk"}}, natsq.WithAttach())
	if err != nil {
		t.Fatalf("New with WithAttach: %v", err)
	}
	defer q.Close()
	if _, err := q.Stats(ctx); err != nil {
		t.Errorf("stats of the attached queue: %v", err)
	}
	if got := q.Config(); got.VisibilityTimeout != 5*time.Minute || got.DedupWindow != time.Hour {
		t.Errorf("attached Config: visibility %s, dedup %s; want the dispatchers' 5m0s and 1h0m0s", got.VisibilityTimeout, got.DedupWindow)
	}
	s, err := js.Stream(ctx, "SLUICE_attach")
	if err != nil {
		t.Fatal(err)
	}
	if d := s.CachedInfo().Config.Duplicates; d != time.Hour {
		t.Errorf("stream duplicate window after attaching: %s, want 1h0m0s", d)
	}
	for _, lane := range run.Lanes {
		c, err := s.Consumer(ctx, "lane_"+lane)
		if err != nil {
			t.Fatal(err)
		}
		if w := c.CachedInfo().Config.AckWait; w != 5*time.Minute {
			t.Errorf("lane %s ack wait after attaching: %s, want 5m0s", lane, w)
		}
	}
}

// Attaching to a queue, or a lane, that no dispatcher made is ErrNoQueue,
// and creates nothing.
func TestAttachMissing(t *testing.T) {
	srv := testnats.Start(t)
	_, js := open(t, srv.Conn(), queue.Config{Name: "present", Lanes: []string{"otp"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tt := range []struct {
		cfg  queue.Config
		want string
	}{
		{queue.Config{Name: "absent", Lanes: []string{"otp"}}, "no queue absent"},
		{queue.Config{Name: "present", Lanes: []string{"otp", "default"}}, "no lane default"},
	} {
		q, err := natsq.New(ctx, js, tt.cfg, natsq.WithAttach())
		if err == nil {
			_ = q.Close()
		}
		if !errors.Is(err, natsq.ErrNoQueue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("attach %s %v: %v; want ErrNoQueue and %q", tt.cfg.Name, tt.cfg.Lanes, err, tt.want)
		}
	}
	if _, err := js.Stream(ctx, "SLUICE_absent"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream SLUICE_absent after a failed attach: %v, want none", err)
	}
	s, err := js.Stream(ctx, "SLUICE_present")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consumer(ctx, "lane_default"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("consumer lane_default after a failed attach: %v, want none", err)
	}
}
