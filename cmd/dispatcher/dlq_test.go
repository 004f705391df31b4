package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
	"github.com/sluicehq/sluice/queue/redisq"
)

// deadLetters makes n dead letters in lane default of queue name, with the
// lanes of configs/sluice.yaml.
func deadLetters(t *testing.T, srv *testredis.Server, name string, n int) queue.Queue {
	t.Helper()
	q, err := redisq.New(srv.Client(), queue.Config{Name: name, Lanes: []string{"vip", "default"}, Consumer: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	ctx := context.Background()
	jobs := make([]*queue.Job, n)
	for i := range jobs {
		jobs[i] = &queue.Job{ID: fmt.Sprintf("d%05d", i), Lane: "default", Payload: json.RawMessage(`{}`)}
	}
	if _, err := q.Enqueue(ctx, jobs...); err != nil {
		t.Fatal(err)
	}
	queuetest.DeadLetterN(t, q, "default", n, "provider answered 400", 30*time.Second)
	return q
}

// A purge cut off by its --timeout says how many of how many it deleted,
// and gives one error, not one per dead letter left; run again without a
// limit, it deletes the rest.
func TestDLQPurgeTimeout(t *testing.T) {
	const n = 1500 // some 6,000 round trips: far more than 100 ms
	srv := testredis.Start(t, testredis.Options{})
	q := deadLetters(t, srv, "purgetest", n)
	env := map[string]string{"SLUICE_REDIS_URL": srv.URL(), "SLUICE_QUEUE_NAME": "purgetest"}
	cfg := []string{"--config", "../../configs/sluice.yaml"}

	code, out, stderr := runCmd(t, env, append([]string{"dlq", "purge", "--timeout", "100ms"}, cfg...)...)
	m := regexp.MustCompile(`^deleted (\d+) of 1500\n$`).FindStringSubmatch(out)
	if code != 1 || m == nil {
		t.Fatalf("purge with --timeout 100ms: exit %d, stdout %q; want 1 and deleted N of 1500", code, out)
	}
	deleted, _ := strconv.Atoi(m[1])
	if deleted >= n {
		t.Fatalf("purge with --timeout 100ms deleted all %d", deleted)
	}
	// stderr: the audit line, and the error.
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `msg="sluice: audit"`) || !strings.Contains(lines[0], "deleted "+m[1]+" of 1500") ||
		!strings.HasPrefix(lines[1], "dispatcher: ") || !strings.Contains(lines[1], "deadline exceeded") {
		t.Errorf("stderr has %d lines, want the audit line with the count and one error naming the deadline:\n%.2000s", len(lines), stderr)
	}
	st, err := q.Stats(context.Background())
	if err != nil || st.DeadLetters != int64(n-deleted) {
		t.Errorf("dead letters left: %d, %v; want %d", st.DeadLetters, err, n-deleted)
	}

	code, out, stderr = runCmd(t, env, append([]string{"dlq", "purge"}, cfg...)...)
	if want := fmt.Sprintf("deleted %d of %d\n", n-deleted, n-deleted); code != 0 || out != want {
		t.Errorf("purge: exit %d, %q %q; want 0 and %q", code, out, stderr, want)
	}
	if st, err := q.Stats(context.Background()); err != nil || st.DeadLetters != 0 {
		t.Errorf("dead letters after the purge: %d, %v; want 0", st.DeadLetters, err)
	}
}

// The bulk commands' context drops the admin commands' deadline (a purge's
// work grows with the dead letters) but ends with the command's (Ctrl-C),
// or at --timeout.
func TestBulkContext(t *testing.T) {
	cmdCtx, interrupt := context.WithCancel(context.Background())
	ctx, stop := bulkContext(cmdCtx, 0)
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		t.Errorf("bulk context has a deadline %v; want none", d)
	}
	interrupt()
	<-ctx.Done() // Ctrl-C ends it
	limited, stop2 := bulkContext(context.Background(), time.Hour)
	defer stop2()
	if d, ok := limited.Deadline(); !ok || time.Until(d) < 59*time.Minute {
		t.Errorf("bulk context with --timeout 1h: deadline %v, %t; want about an hour from now", d, ok)
	}
}
