package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// natsQueue sets up queue name on srv as the dispatchers would, with cfg's
// lanes and settings, and returns a JetStream handle to inspect it.
func natsQueue(t *testing.T, srv *testnats.Server, cfg queue.Config) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := natsq.New(ctx, js, cfg)
	if err != nil {
		t.Fatalf("natsq.New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return js
}

// The admin commands read a NATS queue as the dispatchers set it up: run
// with the defaults (no file), they change neither the stream's duplicate
// window nor the lanes' ack wait; a queue no dispatcher made is named as
// missing, and not created.
func TestAdminLeavesNATSAlone(t *testing.T) {
	srv := testnats.Start(t)
	rsrv := testredis.Start(t, testredis.Options{})
	js := natsQueue(t, srv, queue.Config{Name: "sms", Lanes: []string{"default"}, VisibilityTimeout: 5 * time.Minute, DedupWindow: time.Hour})
	env := map[string]string{"SLUICE_QUEUE_BACKEND": "nats", "SLUICE_NATS_URL": srv.URL(), "SLUICE_REDIS_URL": rsrv.URL(), "SLUICE_QUEUE_NAME": "sms"}
	for _, args := range [][]string{{"status"}, {"dlq", "list"}, {"pause"}} {
		if code, out, stderr := runCmd(t, env, args...); code != 0 {
			t.Errorf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "SLUICE_sms")
	if err != nil {
		t.Fatal(err)
	}
	if d := s.CachedInfo().Config.Duplicates; d != time.Hour {
		t.Errorf("stream duplicate window after the admin commands: %s, want the dispatchers' 1h0m0s", d)
	}
	c, err := s.Consumer(ctx, "lane_default")
	if err != nil {
		t.Fatal(err)
	}
	if w := c.CachedInfo().Config.AckWait; w != 5*time.Minute {
		t.Errorf("lane default's ack wait after the admin commands: %s, want the dispatchers' 5m0s", w)
	}

	env["SLUICE_QUEUE_NAME"] = "nosuch"
	code, out, stderr := runCmd(t, env, "status")
	if code != 1 || !strings.Contains(stderr, "no queue nosuch") || !strings.Contains(stderr, "start a dispatcher first") {
		t.Errorf("status of a queue no dispatcher made: exit %d, %q %q; want 1 and no queue nosuch: start a dispatcher first", code, out, stderr)
	}
	if _, err := js.Stream(ctx, "SLUICE_nosuch"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream SLUICE_nosuch after status: %v, want none made", err)
	}
}
