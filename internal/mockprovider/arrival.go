package mockprovider

import (
	"cmp"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Request headers the HTTP sink sends with every job.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderJobID          = "X-Sluice-Job-Id"
	HeaderLane           = "X-Sluice-Lane"
	HeaderAttempt        = "X-Sluice-Attempt"
	HeaderEnqueuedAt     = "X-Sluice-Enqueued-At"
)

// Arrival is one request received on the provider's path, and the answer
// given to it.
type Arrival struct {
	// Seq numbers arrivals from 1 in the order they were received, since
	// the provider started or was last reset.
	Seq int64 `json:"seq"`
	// At is when the request reached the provider's host: on Linux the
	// kernel's receive time of its bytes, else the server's clock when the
	// request reached the handler (see recvstamp.go). It carries a
	// monotonic reading in-process.
	At time.Time `json:"at"`
	// JobID is the X-Sluice-Job-Id header.
	JobID string `json:"job_id,omitempty"`
	// Lane is the X-Sluice-Lane header.
	Lane string `json:"lane,omitempty"`
	// Attempt is the X-Sluice-Attempt header; 0 when absent or not an integer.
	Attempt int `json:"attempt,omitempty"`
	// Key is the Idempotency-Key header.
	Key string `json:"key,omitempty"`
	// EnqueuedAt is the X-Sluice-Enqueued-At header (RFC 3339); zero when
	// absent or unreadable.
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
	// Method is the request's method.
	Method string `json:"method,omitempty"`
	// URI is the request's path and query, as received.
	URI string `json:"uri,omitempty"`
	// BodyBytes is the size of the request body.
	BodyBytes int `json:"body_bytes"`
	// Body is the request body when Config.KeepBodies is set and the body
	// is valid JSON.
	Body json.RawMessage `json:"body,omitempty"`
	// RawBody is the request body when Config.KeepBodies is set and the
	// body is not JSON (a form, text): its exact bytes.
	RawBody []byte `json:"raw_body,omitempty"`
	// Header is the request's headers when Config.KeepBodies is set.
	Header http.Header `json:"header,omitempty"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
	// RetryAfter is the Retry-After answered with it, zero when none.
	RetryAfter time.Duration `json:"retry_after_ns,omitempty"`
}

// Delivered reports whether the answer was a 2xx, which the sink counts as
// delivered.
func (a Arrival) Delivered() bool { return a.Status >= 200 && a.Status < 300 }

// identity is what duplicates are counted by: the job id, else the
// idempotency key.
func (a Arrival) identity() string {
	if a.JobID != "" {
		return a.JobID
	}
	return a.Key
}

// arrivalFromRequest reads the sluice headers of r into an Arrival.
func arrivalFromRequest(r *http.Request, at time.Time) Arrival {
	a := Arrival{
		At:     at,
		Method: r.Method,
		URI:    r.URL.RequestURI(),
		JobID:  r.Header.Get(HeaderJobID),
		Lane:   r.Header.Get(HeaderLane),
		Key:    r.Header.Get(HeaderIdempotencyKey),
	}
	if n, err := strconv.Atoi(strings.TrimSpace(r.Header.Get(HeaderAttempt))); err == nil {
		a.Attempt = n
	}
	if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(r.Header.Get(HeaderEnqueuedAt))); err == nil {
		a.EnqueuedAt = t
	}
	return a
}

// recorder keeps the last max arrivals in a ring. It is safe for
// concurrent use.
type recorder struct {
	mu      sync.Mutex
	max     int
	buf     []Arrival           // in arrival order until full, then a ring starting at next
	next    int                 // index of the oldest arrival once buf is full
	dropped int64               // arrivals forgotten since the last reset
	total   int64               // arrivals since the last reset
	done    map[string]struct{} // jobs answered 2xx, by job id else key; at most max
	beyond  int                 // 2xx answers to jobs not in done once done was full
}

func newRecorder(max int) *recorder { return &recorder{max: max} }

// add keeps a, forgetting the oldest arrival when full.
func (r *recorder) add(a Arrival) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if id := cmp.Or(a.JobID, a.Key); id != "" && a.Status/100 == 2 {
		if r.done == nil {
			r.done = map[string]struct{}{}
		}
		if _, seen := r.done[id]; !seen {
			if len(r.done) < r.max {
				r.done[id] = struct{}{}
			} else { // bounded as the arrivals are: counted, not remembered
				r.beyond++
			}
		}
	}
	if len(r.buf) < r.max {
		r.buf = append(r.buf, a)
		return
	}
	r.buf[r.next] = a
	r.next = (r.next + 1) % r.max
	r.dropped++
}

// snapshot returns a copy of the arrivals kept, oldest first, and how many
// were dropped.
func (r *recorder) snapshot() ([]Arrival, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Arrival, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	out = append(out, r.buf[:r.next]...)
	return out, r.dropped
}

// reset forgets everything.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf, r.next, r.dropped, r.total, r.done, r.beyond = nil, 0, 0, 0, nil, 0
}

// counts returns the arrivals and distinct jobs delivered since the last
// reset: exact for the first max distinct jobs; past those, each 2xx to a
// job not among them counts as one more.
func (r *recorder) counts() (int64, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total, len(r.done) + r.beyond
}
