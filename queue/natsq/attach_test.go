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

// With WithKeepLanes, a dead letter of a lane the queue does not have is
// left where it is and named, while the others are requeued.
func TestRequeueKeepLanes(t *testing.T) {
	srv := testnats.Start(t)
	run, js := open(t, srv.Conn(), queue.Config{Name: "keep", Lanes: []string{"otp", "bulk"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, j := range []struct{ id, lane string }{{"j1", "otp"}, {"j2", "bulk"}} {
		if _, err := run.Enqueue(ctx, &queue.Job{ID: j.id, Lane: j.lane, Payload: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		ds, err := run.Fetch(ctx, j.lane, 1)
		if err != nil || len(ds) != 1 {
			t.Fatalf("fetch %s: %d, %v", j.lane, len(ds), err)
		}
		if err := ds[0].DeadLetter(ctx, "no"); err != nil {
			t.Fatal(err)
		}
	}
	admin, err := natsq.New(ctx, js, queue.Config{Name: "keep", Lanes: []string{"bulk"}}, natsq.WithAttach(), natsq.WithKeepLanes())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	n, err := admin.Requeue(ctx)
	if n != 1 || !errors.Is(err, natsq.ErrUnknownLane) || !strings.Contains(err.Error(), "j1 (lane otp)") {
		t.Errorf("Requeue all: got %d, %v; want 1 (j2) and ErrUnknownLane naming j1 (lane otp)", n, err)
	}
	dead, err := run.ListDead(ctx, 0)
	if err != nil || len(dead) != 1 || dead[0].Job.ID != "j1" {
		t.Errorf("dead letters left: %+v, %v; want j1", dead, err)
	}
	st, err := run.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range st.Lanes {
		if want := map[string]int64{"otp": 0, "bulk": 1}[l.Lane]; l.Ready != want {
			t.Errorf("lane %s: %d ready, want %d", l.Lane, l.Ready, want)
		}
	}
}
