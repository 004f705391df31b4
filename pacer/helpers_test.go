package pacer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/poll"
	"github.com/sluicehq/sluice/internal/testredis"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures are expected in fault tests
	goleak.VerifyTestMain(m)
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// stamps collects the Redis-clock stamps of slots spent by waiters.
type stamps struct {
	mu   sync.Mutex
	list []time.Time
	errs int
}

func (s *stamps) add(t time.Time) {
	s.mu.Lock()
	s.list = append(s.list, t)
	s.mu.Unlock()
}

func (s *stamps) fail() {
	s.mu.Lock()
	s.errs++
	s.mu.Unlock()
}

// snapshot returns the stamps so far, sorted.
func (s *stamps) snapshot() []time.Time {
	s.mu.Lock()
	out := slices.Clone(s.list)
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func (s *stamps) errCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs
}

// newClientPacer returns a pacer on its own connection to srv.
func newClientPacer(t *testing.T, srv *testredis.Server, cfg Config) *Pacer {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	p, err := New(rdb, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

// slowLink returns a client of srv through an embedded toxiproxy that
// delays every reply by latency.
func slowLink(t *testing.T, srv *testredis.Server, latency time.Duration) *redis.Client {
	t.Helper()
	rdb, _ := slowLinkProxy(t, srv, latency)
	return rdb
}

// slowLinkProxy is slowLink that also returns the proxy, whose toxic
// "delay" a test may remove to make the link fast.
func slowLinkProxy(t *testing.T, srv *testredis.Server, latency time.Duration) (*redis.Client, *toxiproxy.Proxy) {
	t.Helper()
	return lopsidedLink(t, srv, "downstream", latency)
}

// lopsidedLink is a client for srv through a proxy that delays one
// direction (stream: "upstream", towards Redis, or "downstream") by
// latency, with the proxy; its toxic is named "delay".
func lopsidedLink(t *testing.T, srv *testredis.Server, stream string, latency time.Duration) (*redis.Client, *toxiproxy.Proxy) {
	t.Helper()
	tp := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	link := toxiproxy.NewProxy(tp, t.Name(), "127.0.0.1:0", srv.Addr())
	if err := link.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(link.Stop)
	if _, err := link.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"delay","type":"latency","stream":%q,"attributes":{"latency":%d}}`, stream, latency.Milliseconds()))); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: link.Listen, MaxRetries: -1, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, link
}

// spin runs a waiter on p until ctx ends, recording the stamp of every slot
// it spends; errors other than ctx's are counted and retried after 10ms.
func spin(ctx context.Context, p *Pacer, rec *stamps, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			st, err := p.Take(ctx, 1)
			switch {
			case err == nil:
				rec.add(st.Stamp)
			case ctx.Err() != nil:
				return
			default:
				rec.fail()
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}()
}

// within counts the stamps in [from, to).
func within(list []time.Time, from, to time.Time) int {
	n := 0
	for _, s := range list {
		if !s.Before(from) && s.Before(to) {
			n++
		}
	}
	return n
}

// checkWindows fails when any window of any length holds more than
// burst + ceil(rate×length) + 1 stamps. list must be sorted.
func checkWindows(t *testing.T, list []time.Time, rate float64, burst int) {
	t.Helper()
	worst, worstSpan := 0.0, time.Duration(0)
	for i := range list {
		for j := i; j < len(list); j++ {
			span := list[j].Sub(list[i])
			count := j - i + 1
			bound := burst + int(math.Ceil(rate*span.Seconds())) + 1
			if count > bound {
				t.Fatalf("window of %s from %s holds %d slots, more than the bound %d (rate %v, burst %d)",
					span, list[i].Format("15:04:05.000000"), count, bound, rate, burst)
			}
			if excess := float64(count) - rate*span.Seconds(); excess > worst {
				worst, worstSpan = excess, span
			}
		}
	}
	t.Logf("windows: worst excess over rate×length is %.2f slots (window %s)", worst, worstSpan)
}

// eventually polls cond every 5ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, 5*time.Millisecond, what, cond)
}

// redisNow reads the schedule's Redis time.
func redisNow(t *testing.T, p *Pacer) time.Time {
	t.Helper()
	st, err := p.Controls().State(context.Background())
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	return st.Now
}
