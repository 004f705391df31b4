package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/queue"
)

func TestLogSink(t *testing.T) {
	var buf bytes.Buffer
	s := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	j := &queue.Job{ID: "job-7", Lane: "vip", Attempt: 2, Payload: json.RawMessage(`{"text":"PAYLOAD-SECRET"}`)}
	if err := s.Send(context.Background(), j); err != nil {
		t.Fatalf("Send: got %v, want nil", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("log record %q: %v", buf.String(), err)
	}
	want := map[string]any{"job_id": "job-7", "lane": "vip", "attempt": 2.0, "payload_bytes": float64(len(j.Payload))}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s: got %v, want %v", k, rec[k], v)
		}
	}
	if bytes.Contains(buf.Bytes(), []byte("PAYLOAD-SECRET")) {
		t.Errorf("got %q, which shows the payload", buf.String())
	}
}

func TestLogSinkEndedContext(t *testing.T) {
	var buf bytes.Buffer
	s := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Send(ctx, &queue.Job{ID: "j"})
	if !errors.Is(err, ErrTransient) || !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want ErrTransient and context.Canceled", err)
	}
	if buf.Len() != 0 {
		t.Errorf("got %q logged, want nothing", buf.String())
	}
}

func TestLogSinkGate(t *testing.T) {
	var buf bytes.Buffer
	s := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	ctx := WithGate(context.Background(), func() error { return ErrLate })
	if err := s.Send(ctx, &queue.Job{ID: "j"}); !errors.Is(err, ErrLate) || errors.Is(err, ErrTransient) {
		t.Errorf("Send with a refusing gate: got %v, want ErrLate and not ErrTransient", err)
	}
	if buf.Len() != 0 {
		t.Errorf("got %q logged, want nothing", buf.String())
	}
	ctx = WithGate(context.Background(), func() error { return nil })
	if err := s.Send(ctx, &queue.Job{ID: "j"}); err != nil || buf.Len() == 0 {
		t.Errorf("Send with a passing gate: got %v and %q logged, want nil and a record", err, buf.String())
	}
}

// The log sink runs the hold, then the gate, right before the record: a
// refusing hold logs nothing.
func TestLogSinkHold(t *testing.T) {
	var buf bytes.Buffer
	s := NewLog(slog.New(slog.NewJSONHandler(&buf, nil)))
	if !s.Holds() {
		t.Fatal("the log sink does not hold; want a Holder")
	}
	var order []string
	ctx := WithGate(context.Background(), func() error { order = append(order, "gate"); return nil })
	refusing := WithHold(ctx, func() error { order = append(order, "hold"); return ErrLate })
	if err := s.Send(refusing, &queue.Job{ID: "j"}); !errors.Is(err, ErrLate) || buf.Len() != 0 {
		t.Errorf("Send with a refusing hold: got %v and %q logged, want ErrLate and nothing", err, buf.String())
	}
	passing := WithHold(ctx, func() error { order = append(order, "hold"); return nil })
	if err := s.Send(passing, &queue.Job{ID: "j"}); err != nil || buf.Len() == 0 {
		t.Errorf("Send with a passing hold: got %v and %q logged, want nil and a record", err, buf.String())
	}
	if got := strings.Join(order, " "); got != "hold hold gate" {
		t.Errorf("ran %q, want %q: the gate runs after the hold, and not after a refusal", got, "hold hold gate")
	}
}
