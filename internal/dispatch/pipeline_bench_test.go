package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/dispatch"
	"github.com/sluicehq/sluice/internal/mockprovider"
	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/sink"
)

// BenchmarkPipeline drains b.N jobs through one engine on Redis with no
// cap: queue → pacer → HTTP sink → mock provider → ack, in one process.
func BenchmarkPipeline(b *testing.B) {
	rs := testredis.Start(b, testredis.Options{})
	prov, err := mockprovider.New(mockprovider.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := prov.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer prov.Close()
	name := fmt.Sprintf("pipe%d", time.Now().UnixNano()%1e6)
	q, err := redisq.New(rs.Client(), queue.Config{Name: name, Lanes: []string{"default"}})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	jobs := make([]*queue.Job, b.N)
	for i := range jobs {
		jobs[i] = &queue.Job{Payload: json.RawMessage(`{"text":"hi"}`)}
	}
	for i := 0; i < len(jobs); i += 500 {
		if _, err := q.Enqueue(ctx, jobs[i:min(i+500, len(jobs))]...); err != nil {
			b.Fatal(err)
		}
	}
	p, _ := pacer.New(rs.Client(), pacer.Config{Name: name, Rate: 1e6, Burst: 1000})
	s, _ := sink.NewHTTP(sink.HTTPConfig{URL: prov.URL()})
	defer s.Close()
	e, err := dispatch.New(dispatch.Config{RateHint: 1e6, MaxLaneBuffer: 64}, dispatch.Deps{Queue: q, Pacer: p, Sink: s,
		Priority: priority.Config{Lanes: []priority.Lane{{Name: "default"}}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- e.Run(runCtx) }()
	poll.Until(b, time.Minute, 5*time.Millisecond, "every job delivered", func() bool {
		_, n := prov.Counts()
		return n >= b.N
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
	b.ReportMetric(float64(prov.Connections())/float64(b.N)*1000, "conns/1000jobs")
	stop()
	<-done
}
