package producer

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/sink"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// maxPayload is the payload limit of the test queue.
const maxPayload = 1024

var prio = priority.Config{
	Lanes:           []priority.Lane{{Name: "vip"}, {Name: "bulk"}, {Name: "default"}},
	PrivilegedUsers: []string{"alice"},
}

// setup returns a producer on a redisq queue in a private redis-server.
func setup(t *testing.T) (*Producer, *redisq.Queue) {
	t.Helper()
	srv := testredis.Start(t, testredis.Options{})
	q, err := redisq.New(srv.Client(), queue.Config{Name: "sms", Lanes: prio.LaneNames(), MaxPayloadBytes: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	p, err := New(q, prio, WithMaxPayloadBytes(maxPayload))
	if err != nil {
		t.Fatal(err)
	}
	return p, q
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ready returns the number of ready jobs in each lane.
func ready(t *testing.T, q *redisq.Queue) map[string]int64 {
	t.Helper()
	st, err := q.Stats(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, l := range st.Lanes {
		got[l.Lane] = l.Ready + l.Delayed + l.InFlight
	}
	return got
}

// fetchIDs fetches want jobs from lane and returns their ids.
func fetchIDs(t *testing.T, q *redisq.Queue, lane string, want int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var ids []string
	for len(ids) < want {
		ds, err := q.Fetch(ctx, lane, want-len(ids))
		if err != nil {
			t.Fatalf("Fetch %s: got %d of %d jobs, then %v", lane, len(ids), want, err)
		}
		for _, d := range ds {
			ids = append(ids, d.Job().ID)
		}
	}
	return ids
}

func payload(s string) json.RawMessage { return json.RawMessage(`{"text":"` + s + `"}`) }

func TestEnqueueRoutesByUserUnlessTheJobNamesALane(t *testing.T) {
	p, q := setup(t)
	tests := []struct {
		name string
		job  queue.Job
		want string
	}{
		{"privileged user", queue.Job{ID: "a1", User: "alice"}, "vip"},
		{"ordinary user", queue.Job{ID: "b1", User: "bob"}, "default"},
		{"no user", queue.Job{ID: "n1"}, "default"},
		{"ordinary user, lane given", queue.Job{ID: "b2", User: "bob", Lane: "vip"}, "vip"},
		{"privileged user, lane given", queue.Job{ID: "a2", User: "alice", Lane: "bulk"}, "bulk"},
	}
	for _, tt := range tests {
		j := tt.job
		j.Payload = payload(tt.name)
		res, err := p.Enqueue(ctxT(t), &j)
		if err != nil {
			t.Fatalf("%s: Enqueue: %v", tt.name, err)
		}
		if res.ID != tt.job.ID || res.Duplicate || j.Lane != tt.want {
			t.Errorf("%s: got result %+v and lane %q, want id %s, not a duplicate, lane %q", tt.name, res, j.Lane, tt.job.ID, tt.want)
		}
	}
	// The queue holds each job in the lane chosen.
	for lane, want := range map[string][]string{"vip": {"a1", "b2"}, "bulk": {"a2"}, "default": {"b1", "n1"}} {
		got := fetchIDs(t, q, lane, len(want))
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("lane %s: got jobs %v, want %v", lane, got, want)
		}
	}
}

func TestEnqueueBatchRoutesEachJobAndReportsDuplicates(t *testing.T) {
	p, q := setup(t)
	jobs := []*queue.Job{
		{User: "alice", Key: "k1", Payload: payload("1")},
		{User: "bob", Payload: payload("2")},
		{User: "carol", Lane: "bulk", Payload: payload("3")},
		{User: "alice", Payload: payload("4")},
	}
	res, err := p.EnqueueBatch(ctxT(t), jobs)
	if err != nil {
		t.Fatalf("EnqueueBatch: %v", err)
	}
	if len(res) != len(jobs) {
		t.Fatalf("got %d results, want %d", len(res), len(jobs))
	}
	seen := map[string]bool{}
	for i, r := range res {
		if r.ID == "" || r.ID != jobs[i].ID || r.Duplicate || seen[r.ID] {
			t.Errorf("result %d: got %+v (job id %q), want the job's own new, distinct id", i, r, jobs[i].ID)
		}
		seen[r.ID] = true
	}
	if got, want := ready(t, q), map[string]int64{"vip": 2, "bulk": 1, "default": 1}; !equalCounts(got, want) {
		t.Errorf("got lanes %v, want %v", got, want)
	}
	// The same key again, in a second batch: stored once.
	again := []*queue.Job{{User: "alice", Key: "k1", Payload: payload("1 again")}, {User: "dave", Payload: payload("5")}}
	res2, err := p.EnqueueBatch(ctxT(t), again)
	if err != nil {
		t.Fatalf("EnqueueBatch again: %v", err)
	}
	if !res2[0].Duplicate || res2[0].ID != res[0].ID || res2[1].Duplicate {
		t.Errorf("got %+v, want the first a duplicate of %s and the second new", res2, res[0].ID)
	}
	if got, want := ready(t, q), map[string]int64{"vip": 2, "bulk": 1, "default": 2}; !equalCounts(got, want) {
		t.Errorf("after the duplicate: got lanes %v, want %v", got, want)
	}
	if res, err := p.EnqueueBatch(ctxT(t), nil); res != nil || err != nil {
		t.Errorf("empty batch: got %v, %v, want nothing", res, err)
	}
}

func equalCounts(got, want map[string]int64) bool {
	for _, lane := range prio.LaneNames() {
		if got[lane] != want[lane] {
			return false
		}
	}
	return true
}

func TestBadInputsNameTheFieldAndStoreNothing(t *testing.T) {
	p, q := setup(t)
	big := `{"payload": {"text": "` + strings.Repeat("x", maxPayload) + `"}}`
	tests := []struct {
		name, line, field string
	}{
		{"bad JSON", `{"payload": {"to": "+1555"`, "job"},
		{"unknown lane", `{"lane": "urgent", "payload": 1}`, "lane"},
		{"oversized payload", big, "payload"},
		{"missing payload", `{"user": "alice"}`, "payload"},
		{"bad time", `{"not_before": "21/11/2026", "payload": 1}`, "not_before"},
		{"expiry before start", `{"not_before": "2026-11-21T10:00:00Z", "expires_at": "2026-11-21T09:00:00Z", "payload": 1}`, "expires_at"},
		{"unknown field", `{"payload": 1, "priority": "high"}`, "priority"},
		{"zero cost", `{"payload": 1, "cost": -1}`, "cost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := enqueueLine(t, p, tt.line)
			if !errors.Is(err, queue.ErrInvalidJob) {
				t.Fatalf("got error %v, want one matching queue.ErrInvalidJob", err)
			}
			if !strings.Contains(err.Error(), tt.field+": ") {
				t.Errorf("got error %q, want it to name the field %q", err, tt.field)
			}
		})
	}
	// A batch with one bad job stores none of them.
	batch := []*queue.Job{{Payload: payload("good")}, {Lane: "urgent", Payload: payload("bad")}}
	_, err := p.EnqueueBatch(ctxT(t), batch)
	if !errors.Is(err, queue.ErrInvalidJob) || !strings.Contains(err.Error(), "job 1: lane") {
		t.Errorf("batch: got error %v, want one naming job 1's lane", err)
	}
	if got := ready(t, q); !equalCounts(got, nil) {
		t.Errorf("got lanes %v after the bad inputs, want nothing stored", got)
	}
}

// enqueueLine parses and enqueues one line, checking that Check agrees
// with the queue about it.
func enqueueLine(t *testing.T, p *Producer, line string) error {
	t.Helper()
	j, err := ParseJob([]byte(line))
	if err != nil {
		return err
	}
	checked := p.Check(j)
	_, err = p.Enqueue(ctxT(t), j)
	if (checked == nil) != (err == nil) {
		t.Errorf("Check said %v, the queue said %v: want them to agree", checked, err)
	}
	return err
}

func TestCheckAgreesWithTheQueueAndChangesNothing(t *testing.T) {
	p, _ := setup(t)
	jobs := []queue.Job{
		{User: "alice", Payload: payload("ok")},
		{Lane: "bulk", Cost: 3, Payload: payload("ok")},
		{Lane: "nope", Payload: payload("bad lane")},
		{Payload: json.RawMessage(`{"text":`)},
		{ID: strings.Repeat("i", 300), Payload: payload("long id")},
	}
	for i := range jobs {
		j := jobs[i]
		before := j
		checked := p.Check(&j)
		if j.Lane != before.Lane || j.Cost != before.Cost || j.ID != before.ID {
			t.Errorf("job %d: Check changed the job to %+v", i, j)
		}
		_, err := p.Enqueue(ctxT(t), &j)
		if (checked == nil) != (err == nil) || (checked != nil && !errors.Is(checked, queue.ErrInvalidJob)) {
			t.Errorf("job %d: Check said %v, the queue said %v: want them to agree", i, checked, err)
		}
	}
	if err := p.Check(nil); !errors.Is(err, queue.ErrInvalidJob) {
		t.Errorf("Check(nil): got %v, want an invalid job", err)
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	q := fakeQueue{}
	tests := []struct {
		name string
		q    queue.Enqueuer
		prio priority.Config
		opts []Option
		want []string
	}{
		{"nil queue", nil, prio, nil, []string{"nil queue.Enqueuer"}},
		{"no lanes", q, priority.Config{}, nil, []string{"queue.lanes: at least one lane"}},
		{"bad lane and policy", q, priority.Config{Lanes: []priority.Lane{{Name: "a b"}}, Policy: "random"}, nil,
			[]string{"queue.lanes[0].name", "queue.policy"}},
		{"negative limit", q, prio, []Option{WithMaxPayloadBytes(-1)}, []string{"max payload bytes"}},
	}
	for _, tt := range tests {
		p, err := New(tt.q, tt.prio, tt.opts...)
		if err == nil || p != nil || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v, %v, want an error matching ErrInvalidConfig", tt.name, p, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: got %q, want it to contain %q", tt.name, err, w)
			}
		}
	}
	// New works on a copy: the caller's configuration keeps its zero weights.
	cfg := priority.Config{Lanes: []priority.Lane{{Name: "only"}}}
	if _, err := New(q, cfg); err != nil || cfg.Lanes[0].Weight != 0 {
		t.Errorf("got %v and weight %d, want no error and the caller's config untouched", err, cfg.Lanes[0].Weight)
	}
}

// fakeQueue stands for a queue where none is used.
type fakeQueue struct{}

func (fakeQueue) Enqueue(context.Context, ...*queue.Job) ([]queue.EnqueueResult, error) {
	return nil, errors.New("fakeQueue: not used")
}

func TestEnqueueWrapsBackendErrors(t *testing.T) {
	p, err := New(fakeQueue{}, prio)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Enqueue(context.Background(), &queue.Job{Payload: payload("x")})
	if err == nil || !strings.HasPrefix(err.Error(), "producer: enqueue: ") {
		t.Errorf("got %v, want the backend's error wrapped by producer: enqueue", err)
	}
}

// A job check (the sink's bounds) refuses at enqueue, naming the job and
// the field, and a batch with one refused job stores nothing.
func TestJobCheckRefusesAtEnqueue(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	q, err := redisq.New(srv.Client(), queue.Config{Name: "sms", Lanes: prio.LaneNames()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	b, err := sink.NewBounds(sink.HTTPConfig{URL: "https://api.example.com/send"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(q, prio, WithJobCheck(b.Check), WithMaxCost(5))
	if err != nil {
		t.Fatal(err)
	}
	good := &queue.Job{Payload: json.RawMessage(`1`), Request: &queue.Request{Path: "/v2"}}
	evil := &queue.Job{Payload: json.RawMessage(`1`), Request: &queue.Request{URL: "https://evil.example/x"}}
	_, err = p.EnqueueBatch(ctxT(t), []*queue.Job{good, evil})
	if !errors.Is(err, queue.ErrInvalidJob) || !strings.Contains(err.Error(), "job 1: request.url: host evil.example") {
		t.Errorf("batch with a job for another host: got %v, want job 1's request.url named", err)
	}
	if _, err := p.Enqueue(ctxT(t), evil); err == nil || !strings.Contains(err.Error(), "request.url") {
		t.Errorf("one job for another host: got %v, want request.url named", err)
	}
	if err := p.Check(&queue.Job{Cost: 6, Payload: json.RawMessage(`1`)}); err == nil || !strings.Contains(err.Error(), "cost: must be between 1 and 5") {
		t.Errorf("Check of cost 6 with WithMaxCost(5): got %v, want cost named", err)
	}
	if got := ready(t, q); got["vip"]+got["bulk"]+got["default"] != 0 {
		t.Errorf("stored after refusals: got %v, want nothing", got)
	}
	if _, err := p.Enqueue(ctxT(t), good); err != nil {
		t.Errorf("a job within the bounds: %v", err)
	}
}
