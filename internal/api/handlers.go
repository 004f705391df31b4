package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
)

// Enqueued is the answer for one job: its id and whether it was a
// duplicate of a job stored under the same key within the dedup window.
type Enqueued struct {
	ID        string `json:"id"`
	Duplicate bool   `json:"duplicate"`
}

// BatchEnqueued is the answer for a batch, one entry per job in order.
type BatchEnqueued struct {
	Jobs []Enqueued `json:"jobs"`
}

// JobLocation is the answer of a lookup.
type JobLocation struct {
	ID     string      `json:"id"`
	State  queue.State `json:"state"`
	Lane   string      `json:"lane,omitempty"`
	Reason string      `json:"reason,omitempty"`
	Job    *queue.Job  `json:"job,omitempty"`
}

// Cancelled is the answer of a DELETE: the state the job was in.
type Cancelled struct {
	ID    string      `json:"id"`
	State string      `json:"state"` // "cancelled"
	Was   queue.State `json:"was"`
}

// enqueue handles POST /v1/queues/{queue}/jobs.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "the body must be JSON",
				Problem{Field: "Content-Type", Reason: fmt.Sprintf("must be application/json, got %q", ct)})
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "body too large",
				Problem{Field: "body", Reason: fmt.Sprintf("larger than %d bytes (api.max_body_bytes); split the batch", s.opts.MaxBodyBytes)})
			return
		}
		writeError(w, http.StatusBadRequest, "could not read the body", Problem{Field: "body", Reason: err.Error()})
		return
	}
	jobs, batch, ps := s.parse(body)
	ps = append(ps, s.check(jobs, batch)...)
	if len(ps) > 0 {
		writeError(w, http.StatusBadRequest, "invalid job: nothing was stored", ps...)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	var res []queue.EnqueueResult
	if batch {
		res, err = s.opts.Producer.EnqueueBatch(ctx, jobs)
	} else {
		var one queue.EnqueueResult
		if one, err = s.opts.Producer.Enqueue(ctx, jobs[0]); err == nil {
			res = []queue.EnqueueResult{one}
		}
	}
	if err != nil && isInvalid(err) {
		writeError(w, http.StatusBadRequest, "invalid job: nothing was stored", refused(err, batch, len(jobs))...)
		return
	}
	if err != nil {
		s.backendError(w, r, "enqueue", err, len(res))
		return
	}
	out := make([]Enqueued, len(res))
	status := http.StatusOK // every job a duplicate
	for i, e := range res {
		out[i] = Enqueued{ID: e.ID, Duplicate: e.Duplicate}
		if !e.Duplicate {
			status = http.StatusCreated
		}
	}
	if batch {
		writeJSON(w, status, BatchEnqueued{Jobs: out})
		return
	}
	writeJSON(w, status, out[0])
}

// parse reads one job or a batch ({"jobs": [...]}).
func (s *Server) parse(body []byte) (jobs []*queue.Job, batch bool, ps []Problem) {
	if !utf8.Valid(body) {
		return nil, false, []Problem{{Field: "body", Reason: "not valid UTF-8"}}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, false, []Problem{{Field: "body", Reason: describeJSONError(err)}}
	}
	raw, batch := top["jobs"]
	if !batch {
		j, err := producer.ParseJob(body)
		if err != nil {
			return nil, false, problems(err, "", "job")
		}
		return []*queue.Job{j}, false, nil
	}
	for k := range top {
		if k != "jobs" {
			ps = append(ps, Problem{Field: k, Reason: `unknown field: a batch is {"jobs": [...]} and nothing else`})
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		return nil, true, append(ps, Problem{Field: "jobs", Reason: "must be an array of jobs"})
	}
	switch {
	case len(items) == 0:
		ps = append(ps, Problem{Field: "jobs", Reason: "must hold at least one job"})
	case len(items) > s.opts.MaxBatch:
		ps = append(ps, Problem{Field: "jobs", Reason: fmt.Sprintf("%d jobs, more than api.max_batch (%d)", len(items), s.opts.MaxBatch)})
	}
	if len(ps) > 0 {
		return nil, true, ps
	}
	jobs = make([]*queue.Job, len(items))
	for i, item := range items {
		j, err := producer.ParseJob(item)
		if err != nil {
			ps = append(ps, problems(err, fmt.Sprintf("jobs[%d].", i), "job")...)
			continue
		}
		jobs[i] = j
	}
	return jobs, true, ps
}

// check runs the producer's checks (the queue's limits, the sink's bounds)
// on every job that parsed (nil: it did not), so that a batch with one bad
// job stores nothing and every problem is named at once.
func (s *Server) check(jobs []*queue.Job, batch bool) []Problem {
	var ps []Problem
	for i, j := range jobs {
		if j == nil {
			continue
		}
		prefix := ""
		if batch {
			prefix = fmt.Sprintf("jobs[%d].", i)
		}
		if err := s.opts.Producer.Check(j); err != nil {
			ps = append(ps, problems(err, prefix, "job")...)
		}
	}
	return ps
}

// backendError answers a failed call to the queue: 400 for what the queue
// refused of a job, else 503 (the message is logged, not sent).
func (s *Server) backendError(w http.ResponseWriter, r *http.Request, op string, err error, stored int) {
	if isInvalid(err) {
		writeError(w, http.StatusBadRequest, "invalid job: nothing was stored", problems(err, "", "job")...)
		return
	}
	s.opts.Log.LogAttrs(r.Context(), slog.LevelError, "api: "+op+" failed",
		slog.String("queue", s.opts.Queue), slog.String("err", err.Error()))
	msg := "the queue's backend failed; retrying is safe for jobs with an idempotency key"
	if stored > 0 {
		msg = fmt.Sprintf("the queue's backend failed after storing %d jobs; retry the batch with idempotency keys", stored)
	}
	writeError(w, http.StatusServiceUnavailable, msg, Problem{Field: "queue", Reason: "backend unavailable"})
}

// locate handles GET /v1/queues/{queue}/jobs/{id}.
func (s *Server) locate(w http.ResponseWriter, r *http.Request) {
	id, ok := s.jobID(w, r)
	if !ok {
		return
	}
	if s.opts.Locator == nil {
		writeError(w, http.StatusNotImplemented, "the backend cannot find jobs", Problem{Field: "id", Reason: "lookup not supported by this backend"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	l, err := s.opts.Locator.Locate(ctx, id)
	if err != nil {
		s.backendError(w, r, "locate", err, 0)
		return
	}
	out := JobLocation{ID: id, State: l.State, Reason: l.Reason, Job: l.Job}
	if l.Job != nil {
		out.Lane = l.Job.Lane
	}
	status := http.StatusOK
	if l.State == queue.StateUnknown {
		status = http.StatusNotFound
	}
	writeJSON(w, status, out)
}

// cancel handles DELETE /v1/queues/{queue}/jobs/{id}.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := s.jobID(w, r)
	if !ok {
		return
	}
	if s.opts.Canceler == nil {
		writeError(w, http.StatusNotImplemented, "the backend cannot cancel jobs", Problem{Field: "id", Reason: "cancel not supported by this backend"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	was, err := s.opts.Canceler.Cancel(ctx, id)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such job", Problem{Field: "id", Reason: fmt.Sprintf("job %q is not waiting, delayed or dead (delivered, cancelled or never enqueued)", id)})
	case errors.Is(err, queue.ErrInFlight):
		writeError(w, http.StatusConflict, "the job is in flight", Problem{Field: "id", Reason: fmt.Sprintf("job %q is held by a dispatcher and may be on its way to the provider; it cannot be cancelled", id)})
	case err != nil:
		s.backendError(w, r, "cancel", err, 0)
	default:
		writeJSON(w, http.StatusOK, Cancelled{ID: id, State: "cancelled", Was: was})
	}
}

// jobID reads and checks the {id} of the path.
func (s *Server) jobID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if id == "" || len(id) > 256 || !utf8.ValidString(id) {
		writeError(w, http.StatusBadRequest, "bad job id", Problem{Field: "id", Reason: "must be 1-256 bytes of UTF-8"})
		return "", false
	}
	return id, true
}

// describeJSONError says where a body stops being JSON.
func describeJSONError(err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return fmt.Sprintf(`must be a JSON object (one job, or {"jobs": [...]}), got %s`, te.Value)
	}
	if bytes.Equal(bytes.TrimSpace([]byte(err.Error())), []byte("unexpected end of JSON input")) {
		return "not valid JSON: ends early"
	}
	return "not valid JSON: " + err.Error()
}
