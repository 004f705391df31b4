package mockprovider

import (
	"fmt"
	"testing"
	"time"
)

func TestCounts(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, a := range []Arrival{{JobID: "a", Status: 200}, {JobID: "b", Status: 200}, {JobID: "a", Status: 200}, {JobID: "c", Status: 429}} {
		a.At = now.Add(time.Duration(i) * time.Millisecond)
		p.rec.add(a)
	}
	if n, d := p.Counts(); n != 4 || d != 2 {
		t.Errorf("Counts() = %d, %d; want 4 arrivals, 2 jobs delivered (a twice, c throttled)", n, d)
	}
	p.Reset()
	if n, d := p.Counts(); n != 0 || d != 0 {
		t.Errorf("Counts() after Reset = %d, %d; want 0, 0", n, d)
	}
}

// The delivered jobs remembered for Counts are bounded as the arrivals are
// (MaxArrivals): a long run does not grow the provider's memory without
// end, and Counts goes on counting.
func TestCountsRemembersAtMostMaxArrivals(t *testing.T) {
	p, err := New(Config{Listen: "127.0.0.1:0", MaxArrivals: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		p.rec.add(Arrival{JobID: fmt.Sprintf("j%d", i), Status: 200})
	}
	p.rec.add(Arrival{JobID: "j3", Status: 200}) // remembered: a duplicate
	if n, d := p.Counts(); n != 1001 || d != 1000 {
		t.Errorf("Counts() = %d, %d; want 1001 arrivals, 1000 jobs delivered", n, d)
	}
	p.rec.mu.Lock()
	kept := len(p.rec.done)
	p.rec.mu.Unlock()
	if kept > 10 {
		t.Errorf("remembers %d delivered jobs, want at most MaxArrivals (10)", kept)
	}
}
