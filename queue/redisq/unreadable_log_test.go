package redisq

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
)

// lockedBuffer is a bytes.Buffer safe for the queue's goroutines and the
// test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An unreadable entry that cannot be dead-lettered (here the dead-letter
// stream's key holds a string) is not dropped silently: the queue's logger
// gets a warning naming the entry, the lane and the error.
func TestFetchLogsFailedDeadLetterOfUnreadableEntry(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	var logs lockedBuffer
	q, err := New(srv.Client(), queue.Config{Name: "unreadable", Lanes: []string{"default"}, Consumer: "c1"},
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	c := srv.Client()
	if err := c.Set(t.Context(), q.keys.dead(), "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	eid, err := c.XAdd(t.Context(), &redis.XAddArgs{Stream: q.keys.lane("default"),
		Values: []any{"a", 0, "id", "bad", "j", "{not json"}}).Result()
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	ds, err := q.Fetch(ctx, "default", 1)
	if len(ds) != 0 || (err != nil && !errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("Fetch: got %d deliveries, %v; want none", len(ds), err)
	}
	out := logs.String()
	for _, want := range []string{"level=WARN", "entry=" + eid, "lane=default", "WRONGTYPE"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q: want it to hold %q", out, want)
		}
	}
}
