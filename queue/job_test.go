package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	lanes := []string{"vip", "default"}
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		job    Job
		fields []string // fields named in the error; none: valid
	}{
		{"valid", Job{Lane: "vip", Cost: 1, Payload: json.RawMessage(`{"to":"+1555"}`)}, nil},
		{"missing payload", Job{Lane: "vip", Cost: 1}, []string{"payload"}},
		{"payload not JSON", Job{Lane: "vip", Cost: 1, Payload: json.RawMessage(`{nope`)}, []string{"payload"}},
		{"oversized payload", Job{Lane: "vip", Cost: 1, Payload: json.RawMessage(`"` + strings.Repeat("x", 100) + `"`)}, []string{"payload"}},
		{"unknown lane", Job{Lane: "gold", Cost: 1, Payload: json.RawMessage(`1`)}, []string{"lane"}},
		{"cost below 1", Job{Lane: "vip", Cost: -1, Payload: json.RawMessage(`1`)}, []string{"cost"}},
		{"expires before not_before", Job{Lane: "vip", Cost: 1, Payload: json.RawMessage(`1`), NotBefore: t0, ExpiresAt: t0}, []string{"expires_at"}},
		{"everything wrong", Job{Lane: "x", Cost: 0, ID: strings.Repeat("i", 300)}, []string{"payload", "lane", "cost", "id"}},
	}
	for _, tt := range tests {
		err := tt.job.Validate(lanes, 64)
		if len(tt.fields) == 0 {
			if err != nil {
				t.Errorf("%s: got %v, want nil", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidJob) {
			t.Errorf("%s: got %v, want ErrInvalidJob", tt.name, err)
			continue
		}
		for _, f := range tt.fields {
			if !strings.Contains(err.Error(), f+": ") {
				t.Errorf("%s: error %q does not name %s", tt.name, err, f)
			}
		}
	}
}

// Prepare validates every job before touching any, names bad jobs by
// index, and fills ids, lanes, cost and the enqueue time of good batches.
func TestPrepare(t *testing.T) {
	cfg := Config{Name: "sms", Lanes: []string{"vip", "default"}}
	cfg.SetDefaults()
	now := time.Now()
	good := &Job{Payload: json.RawMessage(`1`)}
	bad := &Job{Lane: "gold", Payload: json.RawMessage(`1`)}
	err := Prepare(&cfg, now, []*Job{good, bad})
	if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), "job 1: lane") {
		t.Fatalf("Prepare with a bad second job: %v, want an error naming job 1's lane", err)
	}
	if good.ID != "" || !good.EnqueuedAt.IsZero() {
		t.Errorf("a refused batch stamped its good job: %+v", good)
	}
	if err := Prepare(&cfg, now, []*Job{good}); err != nil {
		t.Fatal(err)
	}
	if good.ID == "" || good.Lane != "default" || good.Cost != 1 || !good.EnqueuedAt.Equal(now) {
		t.Errorf("prepared job %+v; want an id, lane default (the last), cost 1, enqueued now", good)
	}
}

// The wire format: only payload is required, zero times are left out.
func TestJobJSON(t *testing.T) {
	var j Job
	if err := json.Unmarshal([]byte(`{"user":"alice","key":"k","cost":2,"not_before":"2026-11-21T10:00:00Z","payload":{"to":"+1"}}`), &j); err != nil {
		t.Fatal(err)
	}
	if j.User != "alice" || j.Cost != 2 || j.NotBefore.IsZero() || string(j.Payload) != `{"to":"+1"}` {
		t.Errorf("decoded %+v", j)
	}
	b, _ := json.Marshal(Job{Payload: json.RawMessage(`1`)})
	if string(b) != `{"payload":1}` {
		t.Errorf("encoded %s, want {\"payload\":1}", b)
	}
	if !(&Job{ExpiresAt: time.Now().Add(-time.Second)}).Expired(time.Now()) || (&Job{}).Expired(time.Now()) {
		t.Error("Expired: a past expires_at must expire, a zero one never")
	}
}

func TestConfigValidate(t *testing.T) {
	c := Config{Name: "bad name", Lanes: []string{"vip", "vip"}, VisibilityTimeout: time.Millisecond, MaxAttempts: -1}
	err := c.Validate()
	for _, key := range []string{"queue.name", "queue.lanes[1].name", "queue.visibility_timeout", "queue.max_attempts"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate: %v; want it to name %s", err, key)
		}
	}
}

// Check refuses what the queue would otherwise store wrongly: a cost over
// the queue's largest, a null payload, ids and keys that are not valid
// UTF-8 (JSON would store them with U+FFFD under another id than the
// producer holds), and malformed request parts.
func TestCheckBounds(t *testing.T) {
	l := Limits{Lanes: []string{"default"}, MaxCost: 10}
	ok := json.RawMessage(`{"to":"+1555"}`)
	tests := []struct {
		name  string
		job   Job
		field string // "" for valid
		want  string
	}{
		{"cost at the limit", Job{Lane: "default", Cost: 10, Payload: ok}, "", ""},
		{"cost over the limit", Job{Lane: "default", Cost: 11, Payload: ok}, "cost", "must be between 1 and 10 (queue.max_cost), got 11"},
		{"cost 8000, default limit", Job{Lane: "default", Cost: 8000, Payload: ok}, "", ""},
		{"null payload", Job{Lane: "default", Cost: 1, Payload: json.RawMessage(" null ")}, "payload", "must not be null"},
		{"payload not UTF-8", Job{Lane: "default", Cost: 1, Payload: json.RawMessage("\"\xff\"")}, "payload", "not valid UTF-8"},
		{"id not UTF-8", Job{ID: "bad\xffid", Lane: "default", Cost: 1, Payload: ok}, "id", `not valid UTF-8 ("bad\xffid")`},
		{"key not UTF-8", Job{Key: "\xc3", Lane: "default", Cost: 1, Payload: ok}, "key", "not valid UTF-8"},
		{"user not UTF-8", Job{User: "\xc3", Lane: "default", Cost: 1, Payload: ok}, "user", "not valid UTF-8"},
		{"request fine", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Method: "PUT", Path: "/v2/sms",
			Query: map[string]string{"a": "b"}, Headers: map[string]string{"X-Tenant": "acme"}}}, "", ""},
		{"request method", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Method: "TRACE"}}, "request.method", "must be one of"},
		{"request path relative", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Path: "sms"}}, "request.path", "must start with '/'"},
		{"request path dot-dot", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Path: "/a/../admin"}}, "request.path", `must not have a ".." segment`},
		{"request path query", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Path: "/a?b=c"}}, "request.path", "use request.query"},
		{"request url scheme", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{URL: "ftp://x/"}}, "request.url", `got scheme "ftp"`},
		{"request url credentials", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{URL: "https://u:p@x/"}}, "request.url", "must not carry credentials"},
		{"request header reserved", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Headers: map[string]string{"authorization": "x"}}}, "request.headers.authorization", "set by the sink itself"},
		{"request header sluice", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Headers: map[string]string{"X-Sluice-Lane": "vip"}}}, "request.headers.X-Sluice-Lane", "set by the sink itself"},
		{"request header CRLF", Job{Lane: "default", Cost: 1, Payload: ok, Request: &Request{Headers: map[string]string{"X-A": "a\r\nB: c"}}}, "request.headers.X-A", "without CR, LF"},
	}
	for _, tt := range tests {
		lim := l
		if strings.Contains(tt.name, "default limit") {
			lim.MaxCost = 0
			tt.field, tt.want = "cost", "must be between 1 and 100 (queue.max_cost), got 8000"
		}
		err := tt.job.Check(lim)
		if tt.field == "" {
			if err != nil {
				t.Errorf("%s: got %v, want nil", tt.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !strings.Contains(fe.Reason, tt.want) {
			t.Errorf("%s: got %v, want %s: ...%s", tt.name, err, tt.field, tt.want)
		}
	}
}

// A bad max_cost is refused naming the key; zero means the default.
func TestConfigMaxCost(t *testing.T) {
	c := Config{Name: "sms", Lanes: []string{"default"}}
	c.SetDefaults()
	if c.MaxCost != DefaultMaxCost {
		t.Errorf("MaxCost after SetDefaults: got %d, want %d", c.MaxCost, DefaultMaxCost)
	}
	c.MaxCost = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "queue.max_cost") {
		t.Errorf("max_cost -1: got %v, want an error naming queue.max_cost", err)
	}
}
