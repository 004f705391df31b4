package natsq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// cutPublisher calls cancel once the publish number at has been sent, as
// an interrupt arriving while a batch is in flight would. It is used by
// one goroutine at a time.
type cutPublisher struct {
	jetstream.JetStream
	at     int
	sent   int
	cancel context.CancelFunc
}

func (p *cutPublisher) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := p.JetStream.PublishMsgAsync(m, opts...)
	p.count()
	return f, err
}

func (p *cutPublisher) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	p.count() // before the request: the caller's context ends while it waits
	return p.JetStream.PublishMsg(ctx, m, opts...)
}

func (p *cutPublisher) count() {
	if p.sent++; p.sent == p.at {
		p.cancel()
	}
}

// TestEnqueueCutShortReportsWhatWasStored: when the context ends partway
// through a batch, Enqueue stops publishing, waits for the acks of what it
// published, and returns the results of exactly the jobs stored.
func TestEnqueueCutShortReportsWhatWasStored(t *testing.T) {
	srv := testnats.Start(t)
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		jobs    int
		cutAt   int // the publish after which the context ends; 0: before the call
		stored  int
		wantErr error
	}{
		{"before the call", 1000, 0, 0, context.Canceled},
		{"in the first window", 1000, 100, 100, context.Canceled},
		{"at the end of a window", 1000, 256, 256, context.Canceled},
		{"in the second window", 1000, 300, 300, context.Canceled},
		{"after the last publish", 1000, 1000, 1000, nil},
		{"one job, awaiting its ack", 1, 1, 1, nil},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p := &cutPublisher{JetStream: js, at: tc.cutAt, cancel: cancel}
			q := openOn(t, p, fmt.Sprintf("cut%d", i))
			if tc.cutAt == 0 {
				cancel()
			}
			jobs := make([]*queue.Job, tc.jobs)
			for k := range jobs {
				jobs[k] = &queue.Job{Payload: []byte(fmt.Sprintf(`{"n":%d}`, k))}
			}
			res, err := q.Enqueue(ctx, jobs...)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("Enqueue: got error %v, want %v", err, tc.wantErr)
			}
			if len(res) != tc.stored {
				t.Errorf("Enqueue: got %d results, want %d (the jobs published before the cut)", len(res), tc.stored)
			}
			var reported []string
			for k, r := range res {
				if r.ID != jobs[k].ID || r.Duplicate {
					t.Errorf("result %d: got %+v, want job %s stored", k, r, jobs[k].ID)
				}
				reported = append(reported, r.ID)
			}
			if n := streamCount(t, js, q); n != len(res) {
				t.Errorf("stored %d jobs, reported %d", n, len(res))
			}
			if got := drainIDs(t, q, "only", len(res)); !slices.Equal(got, reported) {
				t.Errorf("stored jobs %d, reported %d: the ids differ", len(got), len(reported))
			}
		})
	}
}

// openOn builds a one-lane Queue named name on js and closes it when the
// test ends.
func openOn(t *testing.T, js jetstream.JetStream, name string) *natsq.Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	q, err := natsq.New(ctx, js, queue.Config{Name: name, Lanes: []string{"only"}})
	if err != nil {
		t.Fatalf("natsq.New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// streamCount returns how many messages q's stream holds: the jobs stored
// and not yet acked. (The lane consumer's pending count, which Stats gives,
// may lag behind the stream for a moment.)
func streamCount(t *testing.T, js jetstream.JetStream, q *natsq.Queue) int {
	t.Helper()
	s, err := js.Stream(t.Context(), "SLUICE_"+q.Config().Name)
	if err != nil {
		t.Fatalf("stream of %s: %v", q.Config().Name, err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatalf("stream info of %s: %v", q.Config().Name, err)
	}
	return int(info.State.Msgs)
}

// drainIDs fetches n jobs from lane, acks them and returns their ids in
// the order fetched.
func drainIDs(t *testing.T, q queue.Consumer, lane string, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var ids []string
	for len(ids) < n {
		ds, err := q.Fetch(ctx, lane, min(n-len(ids), 256))
		if err != nil {
			t.Fatalf("Fetch after %d of %d jobs: %v", len(ids), n, err)
		}
		for _, d := range ds {
			ids = append(ids, d.Job().ID)
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack: %v", err)
			}
		}
	}
	return ids
}
