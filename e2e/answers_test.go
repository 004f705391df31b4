package e2e_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

// The provider's answers, with three replicas: a 429 with Retry-After: 1
// holds every replica back for that second; 5xx then success is retried
// with backoff; 400 is dead-lettered with the answer, never retried.
func TestProviderAnswers(t *testing.T) {
	for _, backend := range []string{"redis", "nats"} {
		t.Run(backend, func(t *testing.T) { testProviderAnswers(t, backend) })
	}
}

func testProviderAnswers(t *testing.T, backend string) {
	const rate = 100.0
	c := newCluster(t, backend, rate, "SLUICE_QUEUE_BACKOFF_MIN=300ms", "SLUICE_QUEUE_BACKOFF_MAX=2s")
	var throttledAt time.Time
	fails := 0
	c.prov.SetResponder(func(a mockprovider.Arrival) mockprovider.Answer {
		switch {
		case a.JobID == "ans-00100" && throttledAt.IsZero():
			throttledAt = a.At
			return mockprovider.Answer{Status: 429, RetryAfter: time.Second}
		case a.JobID == "ans-00020" && fails < 2:
			fails++
			return mockprovider.Answer{Status: 502} // 502, 502, then 200
		case a.JobID == "ans-00030":
			return mockprovider.Answer{Status: 400, Body: `{"error":"invalid number +1555"}`}
		}
		return mockprovider.Answer{Status: 200}
	})
	ids := c.enqueue("ans", "bob", 300)
	c.start(3)
	c.waitDelivered(len(ids)-1, 60*time.Second) // all but the rejected one

	arr := c.prov.Arrivals()
	// 429: nothing from any replica between one horizon of slots granted
	// before it (50ms) plus jitter, and the end of the second.
	quiet := 0
	for _, a := range arr {
		if a.At.After(throttledAt.Add(100*time.Millisecond)) && a.At.Before(throttledAt.Add(time.Second)) {
			quiet++
		}
	}
	if throttledAt.IsZero() || quiet > 0 {
		t.Errorf("throttled at %s: %d requests within the Retry-After second (after 100ms), want 0", throttledAt, quiet)
	}
	// 5xx then success: three attempts, spaced by the backoff.
	var tries []mockprovider.Arrival
	for _, a := range arr {
		if a.JobID == "ans-00020" {
			tries = append(tries, a)
		}
	}
	if len(tries) != 3 || tries[2].Status != 200 {
		t.Fatalf("job ans-00020: %d attempts, want 3 ending in 200", len(tries))
	}
	for i := 1; i < 3; i++ {
		gap := tries[i].At.Sub(tries[i-1].At)
		if tries[i].Attempt != i+1 || gap < 150*time.Millisecond {
			t.Errorf("retry %d: attempt %d after %s; want attempt %d after at least half the 300ms backoff", i, tries[i].Attempt, gap, i+1)
		}
	}
	// 400: sent once, dead-lettered with the provider's answer.
	sent := 0
	for _, a := range arr {
		if a.JobID == "ans-00030" {
			sent++
		}
	}
	if sent != 1 {
		t.Errorf("rejected job sent %d times, want once", sent)
	}
	var dead []string
	eventually(t, 10*time.Second, "the rejected job dead-lettered", func() bool {
		dls, err := c.q.ListDead(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		dead = dead[:0]
		for _, d := range dls {
			dead = append(dead, d.Job.ID+": "+d.Reason)
		}
		return len(dls) == 1
	})
	if !strings.HasPrefix(dead[0], "ans-00030: ") || !strings.Contains(dead[0], "400") || !strings.Contains(dead[0], "invalid number") {
		t.Errorf("dead letter %q; want ans-00030 with the provider's 400 answer", dead[0])
	}
	// The payloads and the 400 answer hold phone numbers (+1555...): no
	// replica may log one.
	c.mu.Lock()
	for _, p := range c.procs {
		if b, err := os.ReadFile(p.log); err != nil || strings.Contains(string(b), "+1555") {
			t.Errorf("%s log (%v) holds a phone number from a payload or the provider's answer", p.name, err)
		}
	}
	c.mu.Unlock()
	t.Logf("429 at %s, %d requests in the following second after 100ms; 502 retried after %s and %s; dead letter %q",
		throttledAt.Format("15:04:05.000"), quiet, tries[1].At.Sub(tries[0].At), tries[2].At.Sub(tries[1].At), dead[0])
}
