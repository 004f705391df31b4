package natsq_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
)

// fetchOne fetches one delivery from lane within a generous bound.
func fetchOne(t *testing.T, q queue.Queue, lane string) queue.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	ds, err := q.Fetch(ctx, lane, 1)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Fetch(%s, 1): got %d deliveries, %v, want 1", lane, len(ds), err)
	}
	return ds[0]
}

// TestAttemptsCountDeliveriesNotWaits follows one job through a NotBefore
// wait, a visibility timeout and a delayed retry: the timeout counts as an
// attempt, the two waits do not.
func TestAttemptsCountDeliveriesNotWaits(t *testing.T) {
	srv := testnats.Start(t)
	cfg := queue.Config{Name: "attempts", Lanes: []string{"only"}, VisibilityTimeout: 300 * time.Millisecond, MaxAttempts: 5}
	q, _ := open(t, srv.Conn(), cfg)

	notBefore := time.Now().Add(400 * time.Millisecond)
	enqueue(t, q, &queue.Job{Payload: json.RawMessage(`{}`), NotBefore: notBefore})
	d := fetchOne(t, q, "only")
	if now := time.Now(); now.Before(notBefore) {
		t.Fatalf("delivered %s before its not_before", notBefore.Sub(now))
	}
	if got := d.Job().Attempt; got != 1 {
		t.Fatalf("after the not_before wait: got attempt %d, want 1", got)
	}
	// Not settled: delivered again after the visibility timeout.
	d = fetchOne(t, q, "only")
	if got := d.Job().Attempt; got != 2 {
		t.Fatalf("after a visibility timeout: got attempt %d, want 2", got)
	}
	retried := time.Now()
	if dead, err := d.Retry(t.Context(), 400*time.Millisecond, "busy"); err != nil || dead {
		t.Fatalf("Retry: got %v, %v, want false, nil", dead, err)
	}
	d = fetchOne(t, q, "only")
	if waited := time.Since(retried); waited < 350*time.Millisecond {
		t.Errorf("retried job delivered %s after Retry, before its delay", waited)
	}
	if j := d.Job(); j.Attempt != 3 || j.LastError != "busy" {
		t.Errorf("after a delayed retry: got attempt %d, last_error %q, want 3, busy", j.Attempt, j.LastError)
	}
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// TestDuplicateOriginalID: a duplicate gets the first job's id while that
// job waits in its lane, and its own id once the first job was acked (the
// key is still remembered).
func TestDuplicateOriginalID(t *testing.T) {
	srv := testnats.Start(t)
	q, _ := open(t, srv.Conn(), queue.Config{Name: "dedup", Lanes: []string{"only"}})
	first := enqueue(t, q, &queue.Job{Key: "k", Payload: json.RawMessage(`1`)})[0]
	dup := enqueue(t, q, &queue.Job{Key: "k", Payload: json.RawMessage(`2`)})[0]
	if !dup.Duplicate || dup.ID != first.ID {
		t.Errorf("duplicate while the first waits: got %+v, want duplicate with id %s", dup, first.ID)
	}
	if err := fetchOne(t, q, "only").Ack(t.Context()); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	late := &queue.Job{Key: "k", Payload: json.RawMessage(`3`)}
	res := enqueue(t, q, late)[0]
	if !res.Duplicate || res.ID != late.ID {
		t.Errorf("duplicate after the first was acked: got %+v, want duplicate with its own id %s", res, late.ID)
	}
}

// TestLayout checks the names and message format the package documents.
func TestLayout(t *testing.T) {
	srv := testnats.Start(t)
	q, js := open(t, srv.Conn(), queue.Config{Name: "sms", Lanes: []string{"vip", "default"}, DedupWindow: time.Minute})
	ctx := t.Context()
	s, err := js.Stream(ctx, "SLUICE_sms")
	if err != nil {
		t.Fatalf("stream SLUICE_sms: %v", err)
	}
	c := s.CachedInfo().Config
	if c.Retention != jetstream.WorkQueuePolicy || c.Storage != jetstream.FileStorage || c.Duplicates != time.Minute ||
		strings.Join(c.Subjects, " ") != "sluice.sms.ready.* sluice.sms.delayed.*" {
		t.Errorf("stream SLUICE_sms: got retention %v storage %v duplicates %v subjects %v", c.Retention, c.Storage, c.Duplicates, c.Subjects)
	}
	d, err := js.Stream(ctx, "SLUICEDLQ_sms")
	if err != nil || d.CachedInfo().Config.Retention != jetstream.LimitsPolicy || d.CachedInfo().Config.Subjects[0] != "sluice.sms.dead" {
		t.Errorf("stream SLUICEDLQ_sms: got %v, %v", d, err)
	}
	for _, name := range []string{"lane_vip", "lane_default", "delayed"} {
		ci, err := js.Consumer(ctx, "SLUICE_sms", name)
		if err != nil {
			t.Errorf("consumer %s: %v", name, err)
			continue
		}
		if ci.CachedInfo().Config.AckPolicy != jetstream.AckExplicitPolicy {
			t.Errorf("consumer %s: got ack policy %v", name, ci.CachedInfo().Config.AckPolicy)
		}
	}
	enqueue(t, q, &queue.Job{Key: "idem-1", User: "alice", Payload: json.RawMessage(`{"to":"+1"}`)})
	m, err := s.GetLastMsgForSubject(ctx, "sluice.sms.ready.default")
	if err != nil {
		t.Fatalf("message on sluice.sms.ready.default: %v", err)
	}
	var j queue.Job
	if err := json.Unmarshal(m.Data, &j); err != nil || j.User != "alice" || j.Key != "idem-1" || string(j.Payload) != `{"to":"+1"}` {
		t.Errorf("message body: got %s (%v), want the job's JSON", m.Data, err)
	}
	if id := m.Header.Get(jetstream.MsgIDHeader); !strings.HasPrefix(id, "k:") || strings.Contains(id, "idem-1") {
		t.Errorf("Nats-Msg-Id: got %q, want k: and the key's hash", id)
	}
}

// TestNewKeepsOperatorSettings: opening a queue again with another dedup
// window and one more lane updates what natsq owns and keeps a limit an
// operator put on the dead letter stream.
func TestNewKeepsOperatorSettings(t *testing.T) {
	srv := testnats.Start(t)
	nc := srv.Conn()
	_, js := open(t, nc, queue.Config{Name: "ops", Lanes: []string{"a"}})
	ctx := t.Context()
	s, err := js.Stream(ctx, "SLUICEDLQ_ops")
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxAge = 72 * time.Hour
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("operator update: %v", err)
	}
	q, _ := open(t, nc, queue.Config{Name: "ops", Lanes: []string{"b", "a"}, DedupWindow: time.Hour})
	s, err = js.Stream(ctx, "SLUICEDLQ_ops")
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := s.CachedInfo().Config; got.MaxAge != 72*time.Hour || got.Duplicates != time.Hour {
		t.Errorf("dead letter stream: got max_age %v duplicates %v, want 72h (kept) and 1h (updated)", got.MaxAge, got.Duplicates)
	}
	enqueue(t, q, &queue.Job{Lane: "b", Payload: json.RawMessage(`1`)})
	if err := fetchOne(t, q, "b").Ack(ctx); err != nil {
		t.Fatalf("Ack on the new lane: %v", err)
	}
}

// TestUnreadableMessageIsDeadLettered: a message on a lane that is not a
// job (published by something else) is dead-lettered, not delivered, and
// does not block the jobs behind it.
func TestUnreadableMessageIsDeadLettered(t *testing.T) {
	srv := testnats.Start(t)
	q, js := open(t, srv.Conn(), queue.Config{Name: "junk", Lanes: []string{"only"}})
	if _, err := js.Publish(t.Context(), "sluice.junk.ready.only", []byte("not json")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	id := enqueue(t, q, &queue.Job{Payload: json.RawMessage(`1`)})[0].ID
	if d := fetchOne(t, q, "only"); d.Job().ID != id {
		t.Errorf("got job %q, want %q after the unreadable message", d.Job().ID, id)
	}
	dead, err := q.ListDead(t.Context(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("ListDead: got %d, %v, want 1", len(dead), err)
	}
	var payload string
	if json.Unmarshal(dead[0].Job.Payload, &payload) != nil || payload != "not json" || !strings.Contains(dead[0].Reason, "unreadable") {
		t.Errorf("dead letter: got payload %s reason %q, want the body as a string, unreadable", dead[0].Job.Payload, dead[0].Reason)
	}
}

// TestNewValidates: every problem is reported, naming its key.
func TestNewValidates(t *testing.T) {
	srv := testnats.Start(t)
	js, err := jetstream.New(srv.Conn())
	if err != nil {
		t.Fatal(err)
	}
	_, err = natsq.New(t.Context(), js, queue.Config{Name: "bad name", MaxPayloadBytes: 16 << 20})
	if !errors.Is(err, queue.ErrInvalidConfig) {
		t.Fatalf("New: got %v, want ErrInvalidConfig", err)
	}
	for _, key := range []string{"queue.name", "queue.lanes", "queue.max_payload_bytes", "max_payload"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("New: got %q, want it to name %s", err, key)
		}
	}
	if _, err := natsq.New(t.Context(), nil, queue.Config{Name: "x", Lanes: []string{"a"}}); !errors.Is(err, queue.ErrInvalidConfig) {
		t.Errorf("New with a nil JetStream: got %v, want ErrInvalidConfig", err)
	}
}

// TestExtendAfterDeadlineIsSettled: a delivery held past its visibility
// timeout without Extend is lost to its consumer.
func TestExtendAfterDeadlineIsSettled(t *testing.T) {
	srv := testnats.Start(t)
	q, _ := open(t, srv.Conn(), queue.Config{Name: "lost", Lanes: []string{"only"}, VisibilityTimeout: 500 * time.Millisecond})
	enqueue(t, q, &queue.Job{Payload: json.RawMessage(`1`)})
	stale := fetchOne(t, q, "only")
	again := fetchOne(t, q, "only") // after the visibility timeout
	if err := stale.Extend(t.Context()); !errors.Is(err, queue.ErrSettled) {
		t.Errorf("Extend of the lost delivery: got %v, want ErrSettled", err)
	}
	if dead, err := stale.Retry(t.Context(), 0, "x"); dead || !errors.Is(err, queue.ErrSettled) {
		t.Errorf("Retry of the lost delivery: got %v, %v, want false, ErrSettled", dead, err)
	}
	if err := again.Ack(t.Context()); err != nil {
		t.Fatalf("Ack of the redelivery: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if ds, err := q.Fetch(ctx, "only", 1); len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Fetch after the ack: got %d deliveries, %v, want none (the lost Retry stored nothing)", len(ds), err)
	}
}

// enqueue enqueues jobs and fails the test on error.
func enqueue(t *testing.T, q queue.Queue, jobs ...*queue.Job) []queue.EnqueueResult {
	t.Helper()
	res, err := q.Enqueue(t.Context(), jobs...)
	if err != nil || len(res) != len(jobs) {
		t.Fatalf("Enqueue: got %d results, %v", len(res), err)
	}
	return res
}

// TestIdleFetchDoesNotPoll: a Fetch waiting on an empty lane sends a
// handful of requests, not a stream of them.
func TestIdleFetchDoesNotPoll(t *testing.T) {
	srv := testnats.Start(t)
	nc := srv.Conn()
	q, _ := open(t, nc, queue.Config{Name: "idle", Lanes: []string{"only"}})
	before := nc.Stats().OutMsgs
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if ds, err := q.Fetch(ctx, "only", 10); len(ds) != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Fetch on an empty lane: got %d deliveries, %v", len(ds), err)
	}
	// One request without waiting and one blocking, for the lane and for
	// the mover of delayed jobs.
	if sent := nc.Stats().OutMsgs - before; sent > 6 {
		t.Errorf("an idle Fetch of 1.5s sent %d messages, want at most 6", sent)
	}
}

// TestRequeueIntoGoneLane: a dead letter whose lane no longer exists is
// requeued into the last lane.
func TestRequeueIntoGoneLane(t *testing.T) {
	srv := testnats.Start(t)
	nc := srv.Conn()
	old, _ := open(t, nc, queue.Config{Name: "lanes", Lanes: []string{"gone", "only"}})
	id := enqueue(t, old, &queue.Job{Lane: "gone", Payload: json.RawMessage(`1`)})[0].ID
	if err := fetchOne(t, old, "gone").DeadLetter(t.Context(), "no"); err != nil {
		t.Fatalf("DeadLetter: %v", err)
	}
	q, _ := open(t, nc, queue.Config{Name: "lanes", Lanes: []string{"only"}})
	if n, err := q.Requeue(t.Context(), id); n != 1 || err != nil {
		t.Fatalf("Requeue: got %d, %v, want 1, nil", n, err)
	}
	if d := fetchOne(t, q, "only"); d.Job().ID != id || d.Job().Lane != "only" || d.Job().Attempt != 1 {
		t.Errorf("requeued job: got id %q lane %q attempt %d, want %q, only, 1", d.Job().ID, d.Job().Lane, d.Job().Attempt, id)
	}
}

// A released job is delivered again at once, before the visibility timeout.
func TestRelease(t *testing.T) {
	ns := testnats.Start(t)
	js, err := jetstream.New(ns.Conn())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := queue.Config{Name: "release", Lanes: []string{"default"}, VisibilityTimeout: 5 * time.Second}
	q, err := natsq.New(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	if _, err := q.Enqueue(ctx, &queue.Job{ID: "r1", Payload: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ds, err := q.Fetch(fctx, "default", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ds[0].(queue.Releaser).Release(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ds2, err := q.Fetch(fctx, "default", 1)
	if err != nil {
		t.Fatal(err)
	}
	if ds2[0].Job().ID != "r1" || time.Since(start) > 4*time.Second {
		t.Errorf("after release: job %s after %s, want r1 before the 5s visibility timeout", ds2[0].Job().ID, time.Since(start))
	}
	if err := ds2[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
}
