package redisq_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
	"github.com/sluicehq/sluice/queue/redisq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// open returns a queue on srv with its own client, closed when t ends.
func open(t *testing.T, srv *testredis.Server, cfg queue.Config) *redisq.Queue {
	t.Helper()
	return openOn(t, srv.Client(), cfg)
}

// openOn returns a queue on client c, closed when t ends.
func openOn(t *testing.T, c redis.UniversalClient, cfg queue.Config) *redisq.Queue {
	t.Helper()
	q, err := redisq.New(c, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

func TestConformance(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, srv)
	queuetest.Run(t, func(t *testing.T, cfg queue.Config) queue.Queue {
		return open(t, srv, cfg)
	}, queuetest.Features{OriginalIDOnDuplicate: true})
}

// TestConformanceMiniredis runs the same suite on miniredis, which the demo
// runs on: it differs from Redis where the scripts used to lean on it (an
// XCLAIM with JUSTID counts a delivery there; keys expire only on its own
// clock), and a difference of that kind shows as a demo that redelivers.
func TestConformanceMiniredis(t *testing.T) {
	m := miniredis.RunT(t)
	queuetest.Run(t, func(t *testing.T, cfg queue.Config) queue.Queue {
		c := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return openOn(t, c, cfg)
	}, queuetest.Features{OriginalIDOnDuplicate: true})
}

func TestNewRefusesBadConfig(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	cases := []struct {
		name string
		cfg  queue.Config
		want []string // every key the error must name
	}{
		{"empty", queue.Config{}, []string{"queue.name", "queue.lanes"}},
		{"bad name and lane", queue.Config{Name: "a b", Lanes: []string{"ok", "ok"}}, []string{"queue.name", "lanes[1].name"}},
		{"short visibility", queue.Config{Name: "q", Lanes: []string{"l"}, VisibilityTimeout: 1}, []string{"queue.visibility_timeout"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := redisq.New(srv.Client(), c.cfg)
			if !errors.Is(err, queue.ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
			for _, key := range c.want {
				if !strings.Contains(err.Error(), key) {
					t.Errorf("got %q, want it to name %s", err, key)
				}
			}
		})
	}
	if _, err := redisq.New(nil, queue.Config{Name: "q", Lanes: []string{"l"}}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("nil client: got %v, want ErrInvalidConfig", err)
	}
}
