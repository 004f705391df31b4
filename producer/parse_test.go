package producer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

func TestParseJobReadsEveryWireField(t *testing.T) {
	line := `{"id": "j1", "lane": "vip", "user": "alice", "key": "idem-123",
		"not_before": "2026-11-21T10:00:00Z", "expires_at": "2026-11-21T10:05:00.5+01:00",
		"cost": 2, "payload": {"to": "+15550100", "text": "hi"}}`
	j, err := ParseJob([]byte(line))
	if err != nil {
		t.Fatalf("ParseJob: got error %v, want none", err)
	}
	wantNB := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	wantEA := time.Date(2026, 11, 21, 9, 5, 0, 5e8, time.UTC)
	switch {
	case j.ID != "j1" || j.Lane != "vip" || j.User != "alice" || j.Key != "idem-123" || j.Cost != 2:
		t.Errorf("got id %q lane %q user %q key %q cost %d, want j1 vip alice idem-123 2", j.ID, j.Lane, j.User, j.Key, j.Cost)
	case !j.NotBefore.Equal(wantNB) || !j.ExpiresAt.Equal(wantEA):
		t.Errorf("got not_before %s expires_at %s, want %s and %s", j.NotBefore, j.ExpiresAt, wantNB, wantEA)
	case string(j.Payload) != `{"to": "+15550100", "text": "hi"}`:
		t.Errorf("got payload %s, want it as given", j.Payload)
	}
}

func TestParseJobOnlyPayloadIsRequired(t *testing.T) {
	for _, line := range []string{`{"payload":"hello"}`, `{"payload":[1,2],"lane":null,"cost":null,"not_before":null}`} {
		j, err := ParseJob([]byte(line))
		if err != nil {
			t.Errorf("%s: got error %v, want none", line, err)
			continue
		}
		if j.ID != "" || j.Lane != "" || j.Cost != 0 || !j.NotBefore.IsZero() {
			t.Errorf("%s: got %+v, want only the payload set", line, j)
		}
	}
}

func TestParseJobErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name, line string
		want       []string // each must appear in the error
	}{
		{"empty", ` `, []string{"job: empty"}},
		{"bad JSON", `{"payload": {"to": }`, []string{"job: not valid JSON at byte"}},
		{"truncated", `{"payload": 1`, []string{"job: not valid JSON"}},
		{"array", `[1, 2]`, []string{"job: must be a JSON object, got an array"}},
		{"string", `"hi"`, []string{"job: must be a JSON object, got a string"}},
		{"trailing", `{"payload": 1} {"payload": 2}`, []string{"job: more after the object"}},
		{"missing payload", `{"user": "bob"}`, []string{"payload: required"}},
		{"null payload", `{"payload": null}`, []string{"payload: must not be null"}},
		{"unknown field", `{"payload": 1, "colour": "red"}`, []string{`colour: unknown field (known: id, lane, user, key, not_before, expires_at, cost, request, payload)`}},
		{"queue's field", `{"payload": 1, "attempt": 3}`, []string{"attempt: set by the queue"}},
		{"twice", `{"payload": 1, "lane": "vip", "lane": "default"}`, []string{"lane: given more than once"}},
		{"bad time", `{"payload": 1, "not_before": "tomorrow"}`, []string{`not_before: must be an RFC 3339 time (2026-11-21T10:00:00Z), got "tomorrow"`}},
		{"time as number", `{"payload": 1, "expires_at": 1700000000}`, []string{"expires_at: must be an RFC 3339 time as a string"}},
		{"fractional cost", `{"payload": 1, "cost": 2.5}`, []string{"cost: must be a whole number, got 2.5"}},
		{"cost as string", `{"payload": 1, "cost": "2"}`, []string{`cost: must be a whole number, got "2"`}},
		{"lane as number", `{"payload": 1, "lane": 7}`, []string{"lane: must be a string, got 7"}},
		{"cost zero", `{"payload": 1, "cost": 0}`, []string{"cost: must be at least 1 (leave it out for 1), got 0"}},
		{"id not UTF-8", "{\"payload\": 1, \"id\": \"bad\xffid\"}", []string{"id: not valid UTF-8"}},
		{"key not UTF-8", "{\"payload\": 1, \"key\": \"k\xfe\"}", []string{"key: not valid UTF-8"}},
		{"request unknown field", `{"payload": 1, "request": {"host": "x"}}`, []string{`request: unknown field "host"`}},
		{"request header not a string", `{"payload": 1, "request": {"headers": {"X-A": 1}}}`, []string{"request.headers"}},
		{"request not an object", `{"payload": 1, "request": "/sms"}`, []string{"request: must be an object"}},
		{"every problem", `{"user": 1, "not_before": "soon", "x": 0}`,
			[]string{"user: must be a string", "not_before: must be an RFC 3339", "x: unknown field", "payload: required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := ParseJob([]byte(tt.line))
			if err == nil {
				t.Fatalf("got job %+v and no error, want an error naming %q", j, tt.want)
			}
			if j != nil {
				t.Errorf("got job %+v with the error, want nil", j)
			}
			if !errors.Is(err, queue.ErrInvalidJob) {
				t.Errorf("got error %v, want one matching queue.ErrInvalidJob", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// FuzzParseJob checks that ParseJob never panics, that every error matches
// queue.ErrInvalidJob, and that a job it accepts has a valid JSON payload
// and reads back the same from its own JSON form.
func FuzzParseJob(f *testing.F) {
	for _, s := range []string{
		`{"payload": 1}`, `{"id": "a", "lane": "vip", "user": "u", "key": "k", "cost": 3, "payload": {"x": [1, 2]}}`,
		`{"not_before": "2026-11-21T10:00:00Z", "expires_at": "2026-11-21T10:05:00.123+02:00", "payload": "s"}`,
		`{"payload": null}`, `[]`, `{`, `{"a": 1, "a": 2}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		j, err := ParseJob(line)
		if err != nil {
			if j != nil || !errors.Is(err, queue.ErrInvalidJob) {
				t.Fatalf("got %+v, %v: want no job and an invalid job error", j, err)
			}
			return
		}
		if !json.Valid(j.Payload) {
			t.Fatalf("accepted payload %q, which is not valid JSON", j.Payload)
		}
		out, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseJob(out)
		if err != nil || back.ID != j.ID || back.Lane != j.Lane || back.Cost != j.Cost || !back.NotBefore.Equal(j.NotBefore) {
			t.Fatalf("%s read back as %+v, %v; want %+v", out, back, err, j)
		}
	})
}
