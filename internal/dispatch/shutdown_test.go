package dispatch

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// unreleasable is a delivery that cannot be given back (no
// queue.Releaser): an unsettled job comes back after the visibility
// timeout.
type unreleasable struct{ d *memDelivery }

func (u unreleasable) Job() *queue.Job                                { return u.d.Job() }
func (u unreleasable) Ack(ctx context.Context) error                  { return u.d.Ack(ctx) }
func (u unreleasable) DeadLetter(ctx context.Context, r string) error { return u.d.DeadLetter(ctx, r) }
func (u unreleasable) Extend(ctx context.Context) error               { return u.d.Extend(ctx) }
func (u unreleasable) Retry(ctx context.Context, delay time.Duration, reason string) (bool, error) {
	return u.d.Retry(ctx, delay, reason)
}

// unreleasableQueue is a memQueue whose deliveries are unreleasable.
type unreleasableQueue struct{ *memQueue }

func (q unreleasableQueue) Fetch(ctx context.Context, lane string, n int) ([]queue.Delivery, error) {
	ds, err := q.memQueue.Fetch(ctx, lane, n)
	for i, d := range ds {
		ds[i] = unreleasable{d.(*memDelivery)}
	}
	return ds, err
}

// A request that outlives ShutdownTimeout is cancelled by the engine, not
// failed by the provider: the job goes back to the queue with no attempt
// spent, even on its last attempt, and is never dead-lettered for it. A
// delivery that cannot be released is left unsettled, to come back after
// the visibility timeout. A provider's answer that came as the request
// was cancelled is the job's failure as any other.
func TestShutdownCancelHandsJobBack(t *testing.T) {
	for _, tt := range []struct {
		name       string
		releasable bool
		answer     error   // what the sink returns once cancelled; nil: ctx's error, no answer
		want       string  // how the job was settled; "" for not at all
		released   float64 // sluice_jobs_total{outcome="released"}
	}{
		{name: "released", releasable: true, want: "release", released: 1},
		{name: "left for redelivery", want: "", released: 1},
		{name: "provider answered", releasable: true, answer: &sink.StatusError{Status: 502}, want: "dead"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inSend := make(chan struct{}, 1)
			s := sink.SenderFunc(func(ctx context.Context, j *queue.Job) error {
				inSend <- struct{}{}
				<-ctx.Done()
				if tt.answer != nil {
					return tt.answer
				}
				return fmt.Errorf("%w: %w", sink.ErrTransient, ctx.Err())
			})
			mq := newMemQueue("vip", "default")
			mq.maxAttem = 1 // the first attempt is the last
			var q Queue = mq
			if !tt.releasable {
				q = unreleasableQueue{mq}
			}
			m, err := NewMetrics(prometheus.NewRegistry(), Sources{})
			if err != nil {
				t.Fatal(err)
			}
			_, stop := runEngine(t, Config{ShutdownTimeout: 50 * time.Millisecond},
				Deps{Queue: q, Pacer: &gatePacer{}, Priority: twoLanes, Sink: s, Metrics: m})
			mq.Enqueue(context.Background(), job("slow", "default", "x"))
			select {
			case <-inSend:
			case <-time.After(10 * time.Second):
				t.Fatal("the job was not sent within 10s")
			}
			stop() // waits 50ms for the request, then cancels it
			d := mq.outcomes()["slow"]
			got := ""
			if d != nil {
				got = d.how
			}
			if got != tt.want {
				t.Errorf("job cancelled by shutdown settled %+v, want %q", d, tt.want)
			}
			wantSettles := 1
			if tt.want == "" {
				wantSettles = 0
			}
			if n := mq.settledCount(); n != wantSettles { // a release after a Retry would hide it
				t.Errorf("job settled %d times, want %d", n, wantSettles)
			}
			if got := testutil.ToFloat64(m.jobs.WithLabelValues("default", outReleased)); got != tt.released {
				t.Errorf(`sluice_jobs_total{outcome="released"} = %v, want %v`, got, tt.released)
			}
		})
	}
}
