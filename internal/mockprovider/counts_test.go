package mockprovider

import (
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
