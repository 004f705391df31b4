package config

import (
	"strings"
	"testing"
	"time"
)

// A dispatcher refuses a visibility timeout that keep-alive cannot cover;
// a request longer than the visibility timeout is fine, and the producer,
// which holds no job, takes any timeout the queue takes.
func TestVisibilityTimeoutForKeepAlive(t *testing.T) {
	for _, tt := range []struct {
		name  string
		env   []string
		wantK []string // problem keys; nil: loads
	}{
		{"default", nil, nil},
		{"2s", []string{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=2s"}, nil},
		{"sink.timeout longer than the visibility timeout",
			[]string{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=5s", "SLUICE_SINK_TIMEOUT=10s"}, nil},
		{"1999ms", []string{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=1999ms"}, []string{"queue.visibility_timeout"}},
		{"500ms", []string{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=500ms"}, []string{"queue.visibility_timeout"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("", tt.env, required())
			if tt.wantK == nil {
				if err != nil {
					t.Errorf("Load: got error\n%v\nwant none", err)
				}
				return
			}
			if got := problemKeys(t, err); strings.Join(got, " ") != strings.Join(tt.wantK, " ") {
				t.Errorf("got problems about %v, want %v; error:\n%v", got, tt.wantK, err)
			}
			if !strings.Contains(err.Error(), "must be at least 2s for the dispatcher") {
				t.Errorf("got error\n%v\nwant it to say the least allowed", err)
			}
		})
	}
	if _, err := LoadProducer("", []string{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=500ms"}, map[string]string{"queue.name": "sms"}); err != nil {
		t.Errorf("LoadProducer with a 500ms visibility timeout: got error\n%v\nwant none", err)
	}
}

// queue.consumer_idle_limit defaults to three visibility timeouts, at least
// 5m; a value under the visibility timeout is refused naming both keys.
func TestConsumerIdleLimit(t *testing.T) {
	for _, tt := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, 5 * time.Minute},
		{[]string{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=10m"}, 30 * time.Minute},
		{[]string{"SLUICE_QUEUE_CONSUMER_IDLE_LIMIT=3s", "SLUICE_QUEUE_VISIBILITY_TIMEOUT=2s"}, 3 * time.Second},
		{[]string{"SLUICE_QUEUE_CONSUMER_IDLE_LIMIT=-1s"}, -time.Second},
	} {
		c := mustLoad(t, "", tt.env, required())
		if got := c.Queue.ConsumerIdleLimit; got != tt.want {
			t.Errorf("%v: queue.consumer_idle_limit = %s, want %s", tt.env, got, tt.want)
		}
	}
	_, err := Load("", []string{"SLUICE_QUEUE_CONSUMER_IDLE_LIMIT=10s", "SLUICE_QUEUE_VISIBILITY_TIMEOUT=30s"}, required())
	if got := problemKeys(t, err); strings.Join(got, " ") != "queue.consumer_idle_limit" {
		t.Errorf("got problems about %v, want queue.consumer_idle_limit; error:\n%v", got, err)
	}
	want := "queue.consumer_idle_limit: 10s must be at least queue.visibility_timeout (30s)"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got error\n%v\nwant it to contain %q", err, want)
	}
}
