package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

func TestProblemsFallbackField(t *testing.T) {
	plain := errors.New("not a job")
	for _, tc := range []struct {
		prefix, want string
	}{
		{"", "job"},
		{"jobs[0].", "jobs[0].job"},
		{"jobs[12].", "jobs[12].job"},
	} {
		got := problems(plain, tc.prefix, "job")
		if len(got) != 1 || got[0].Field != tc.want || got[0].Reason != "not a job" {
			t.Errorf("problems(%q, %q, job) = %+v, want one problem about %s", plain, tc.prefix, got, tc.want)
		}
		// The fallback is named as a FieldError about "job" would be.
		fe := problems(&queue.FieldError{Field: "job", Reason: "nil"}, tc.prefix, "job")
		if len(fe) != 1 || fe[0].Field != tc.want {
			t.Errorf("a FieldError about job under %q: got %+v, want %s", tc.prefix, fe, tc.want)
		}
	}
}

func TestRefusedNamesBatchFields(t *testing.T) {
	cost := &queue.FieldError{Field: "cost", Reason: "x"}
	for _, tc := range []struct {
		what  string
		err   error
		batch bool
		n     int
		want  []Problem
	}{
		{"one job", fmt.Errorf("q: %w", cost), false, 1, []Problem{{"cost", "x"}}},
		{"a batch of one", fmt.Errorf("q: %w", cost), true, 1, []Problem{{"jobs[0].cost", "x"}}},
		{"a batch of one, no FieldError", fmt.Errorf("q: %w", queue.ErrInvalidJob), true, 1,
			[]Problem{{"jobs[0].job", "q: " + queue.ErrInvalidJob.Error()}}},
		// A queue.JobError names its job's index: jobs[2].cost.
		{"job 2 of 3", errors.Join(&queue.JobError{Index: 2, Err: cost}), true, 3, []Problem{{"jobs[2].cost", "x"}}},
		{"jobs 0 and 2 of 3, wrapped", fmt.Errorf("p: %w", fmt.Errorf("q: %w", errors.Join(
			&queue.JobError{Index: 0, Err: errors.Join(cost, &queue.FieldError{Field: "lane", Reason: "y"})},
			&queue.JobError{Index: 2, Err: cost}))), true, 3,
			[]Problem{{"jobs[0].cost", "x"}, {"jobs[0].lane", "y"}, {"jobs[2].cost", "x"}}},
		// An error about one job of several that names none stays about "jobs".
		{"an untyped refusal of 3", fmt.Errorf("q: %w", errors.Join(fmt.Errorf("job 1: %w", cost))), true, 3,
			[]Problem{{"jobs", "job 1: cost: x"}}},
	} {
		got := refused(tc.err, tc.batch, tc.n)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.what, got, tc.want)
		}
		for _, p := range got {
			if tc.batch && p.Field != "jobs" && !strings.HasPrefix(p.Field, "jobs[") {
				t.Errorf("%s: a batch's problem names %q, want jobs[<i>].<field> or jobs", tc.what, p.Field)
			}
		}
	}
}

// preparer enqueues nothing: it answers what queue.Prepare says of the jobs
// under a queue whose cost limit (2) is below the one the API checks.
type preparer struct{}

func (preparer) Check(*queue.Job) error { return nil }

func (p preparer) Enqueue(ctx context.Context, j *queue.Job) (queue.EnqueueResult, error) {
	res, err := p.EnqueueBatch(ctx, []*queue.Job{j})
	if err != nil {
		return queue.EnqueueResult{}, err
	}
	return res[0], nil
}

func (preparer) EnqueueBatch(_ context.Context, jobs []*queue.Job) ([]queue.EnqueueResult, error) {
	cfg := queue.Config{Name: "api", Lanes: []string{"default"}, MaxCost: 2}
	cfg.SetDefaults()
	if err := queue.Prepare(&cfg, time.Now(), jobs); err != nil {
		return nil, fmt.Errorf("preparer: enqueue: %w", err)
	}
	res := make([]queue.EnqueueResult, len(jobs))
	for i, j := range jobs {
		res[i] = queue.EnqueueResult{ID: j.ID}
	}
	return res, nil
}

type noStats struct{}

func (noStats) Stats(context.Context) (queue.Stats, error) { return queue.Stats{}, nil }

func TestEnqueueNamesWhatTheQueueRefused(t *testing.T) {
	const tok = "test-token-0123456789"
	s, err := New(Options{Queue: "api", Producer: preparer{}, Inspector: noStats{}, Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what, body string
		want       []Problem
	}{
		{"one job", `{"cost":3,"payload":1}`,
			[]Problem{{"cost", "must be between 1 and 2 (queue.max_cost), got 3"}}},
		{"a batch of one", `{"jobs":[{"cost":3,"payload":1}]}`,
			[]Problem{{"jobs[0].cost", "must be between 1 and 2 (queue.max_cost), got 3"}}},
		{"a batch of three", `{"jobs":[{"payload":1},{"payload":2},{"cost":3,"payload":3}]}`,
			[]Problem{{"jobs[2].cost", "must be between 1 and 2 (queue.max_cost), got 3"}}},
	} {
		req := httptest.NewRequestWithContext(t.Context(), "POST", "/v1/queues/api/jobs", strings.NewReader(tc.body))
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		var got ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: answer %s: %v", tc.what, rec.Body, err)
		}
		if rec.Code != http.StatusBadRequest || !slices.Equal(got.Error.Fields, tc.want) {
			t.Errorf("%s: got %d %+v, want 400 %+v", tc.what, rec.Code, got.Error.Fields, tc.want)
		}
	}
}
