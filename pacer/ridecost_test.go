package pacer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/testredis"
)

// BenchmarkRideBehindRead prints what Redis's work behind a blocking read
// costs the job the read brings, on an idle host: four readers wait in
// XREADGROUP BLOCK, each with commands pipelined behind its read as a
// ride's are (Ride), and one job is added every 5ms (200/s, as in the
// e2e latency row); the figure is each job's time from XADD to its
// reader having the replies (p50, p99). Redis writes the read's reply
// only after it has run what follows it, so that work is on the job's
// path. Behind the read: nothing; a ride (Ride.Send: reserve.lua); a
// script that only returns TIME; and plain commands (MULTI, TIME, SET NX
// PX, HMGET of the pacer hash, EXEC), as a ride without a script would
// send them. Each iteration is one job (go test -run '^$' -bench
// RideBehindRead -benchtime 600x ./pacer/).
func BenchmarkRideBehindRead(b *testing.B) {
	srv := testredis.Start(b, testredis.Options{})
	timeOnly := redis.NewScript(`local t = redis.call('TIME') return {t[1], t[2]}`)
	for _, behind := range []string{"nothing", "reserve.lua", "time-script", "plain-commands"} {
		b.Run(behind, func(b *testing.B) {
			ctx := context.Background()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: -1, PoolSize: 8})
			defer func() { _ = rdb.Close() }()
			name := fmt.Sprintf("ridecost%d", time.Now().UnixNano()%1e9)
			stream := "s:" + name
			if err := rdb.XGroupCreateMkStream(ctx, stream, "g", "$").Err(); err != nil {
				b.Fatal(err)
			}
			if err := rdb.HSet(ctx, key(name), "tat", "1", "last_now", "1").Err(); err != nil {
				b.Fatal(err)
			}
			for _, s := range []*redis.Script{reserveScript, timeOnly} {
				if err := s.Load(ctx, rdb).Err(); err != nil {
					b.Fatal(err)
				}
			}
			p, err := New(rdb, Config{Name: name, Rate: 500})
			if err != nil {
				b.Fatal(err)
			}
			lats := make(chan time.Duration, b.N+16)
			readCtx, stop := context.WithCancel(ctx)
			defer stop()
			done := make(chan struct{}, 4)
			for r := range 4 {
				go func() {
					defer func() { done <- struct{}{} }()
					for readCtx.Err() == nil {
						pipe := rdb.Pipeline()
						read := pipe.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: fmt.Sprint("c", r),
							Streams: []string{stream, ">"}, Count: 1, Block: 100 * time.Millisecond})
						switch behind {
						case "reserve.lua":
							(&Ride{p: p}).Send(ctx, pipe) // what a ride sends; its reply is not landed
						case "time-script":
							timeOnly.EvalSha(ctx, pipe, nil)
						case "plain-commands":
							pipe.Do(ctx, "multi")
							pipe.Do(ctx, "time")
							pipe.Do(ctx, "set", "ride:"+name, "r", "nx", "px", 3)
							pipe.Do(ctx, "hmget", key(name), "tat", "last_now", "rate_override", "burst_override", "paused", "eff_rate", "a_episode", "seq")
							pipe.Do(ctx, "exec")
						}
						_, _ = pipe.Exec(ctx)
						got := time.Now()
						res, err := read.Result()
						if err != nil || len(res) == 0 {
							continue
						}
						for _, m := range res[0].Messages {
							at, _ := m.Values["t"].(string)
							ns, _ := strconv.ParseInt(at, 10, 64)
							lats <- got.Sub(time.Unix(0, ns))
						}
					}
				}()
			}
			tick := time.NewTicker(5 * time.Millisecond)
			b.ResetTimer()
			for range b.N {
				<-tick.C
				if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream,
					Values: []any{"t", strconv.FormatInt(time.Now().UnixNano(), 10)}}).Err(); err != nil {
					b.Fatal(err)
				}
			}
			tick.Stop()
			var got []time.Duration
			lost := time.NewTimer(10 * time.Second)
			defer lost.Stop()
			for len(got) < b.N {
				select {
				case l := <-lats:
					got = append(got, l)
				case <-lost.C:
					b.Fatalf("%d of %d jobs reached a reader", len(got), b.N)
				}
			}
			stop()
			for range 4 {
				<-done
			}
			slices.Sort(got)
			us := func(q int) float64 { return float64(got[(len(got)-1)*q/100].Microseconds()) }
			b.ReportMetric(us(50), "p50-µs")
			b.ReportMetric(us(99), "p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}
