package pacer

import (
	"testing"
	"time"
)

// The clock map is fed round trips (sent, answered, Redis time) on a
// replica clock that runs 5s behind Redis: local = redis − 5s.
func TestClockMapTrustsTheFastestRoundTrip(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	const skew = 5 * time.Second
	type trip struct {
		sent    time.Duration // local, after base
		up, dn  time.Duration // one-way delays
		wantErr time.Duration // |mapped − true| of a slot 20ms after the call, at most
	}
	c := newClockMap()
	for i, tr := range []trip{
		{sent: 0, up: 100 * time.Microsecond, dn: 100 * time.Microsecond, wantErr: 0},
		// A slow reply: the map keeps the fast sample, so slots do not shift.
		{sent: 10 * time.Millisecond, up: 100 * time.Microsecond, dn: 40 * time.Millisecond, wantErr: 0},
		// Jitter on both legs: still the fast sample.
		{sent: 70 * time.Millisecond, up: 20 * time.Millisecond, dn: 30 * time.Millisecond, wantErr: 0},
	} {
		sent := base.Add(tr.sent)
		ran := sent.Add(tr.up)
		c.add(sent, ran.Add(tr.dn), ran.Add(skew))
		slot := ran.Add(skew + 20*time.Millisecond) // Redis time of a slot
		got := c.local(slot)
		want := ran.Add(20 * time.Millisecond)
		if d := got.Sub(want).Abs(); d > tr.wantErr {
			t.Errorf("trip %d: slot mapped %s off its true local time, want at most %s", i, d, tr.wantErr)
		}
	}
	off, unc := c.offset(base.Add(70 * time.Millisecond))
	if off != skew {
		t.Errorf("offset %s, want %s", off, skew)
	}
	if unc < 100*time.Microsecond || unc > 110*time.Microsecond {
		t.Errorf("uncertainty %s, want half the fastest round trip (100µs) plus drift", unc)
	}
	if got := c.lead(); got < 40*time.Millisecond {
		t.Errorf("lead %s, want at least the slow reply's 40ms", got)
	}
}

func TestClockMapAgesSamples(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	c := newClockMap()
	c.add(base, base.Add(200*time.Microsecond), base.Add(100*time.Microsecond)) // bound 100µs
	// 30s later a 1ms round trip (bound 500µs) beats the old sample, whose
	// bound grew by 30s × 50µs/s = 1.5ms.
	later := base.Add(30 * time.Second)
	c.add(later, later.Add(time.Millisecond), later.Add(500*time.Microsecond))
	if _, unc := c.offset(later.Add(time.Millisecond)); unc > 600*time.Microsecond {
		t.Errorf("uncertainty %s: the map kept the aged sample, want the fresh one (500µs)", unc)
	}
}

func TestClockMapStartsOverAfterAStep(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	c := newClockMap()
	c.add(base, base.Add(100*time.Microsecond), base.Add(50*time.Microsecond))
	// Redis's clock stepped back an hour.
	next := base.Add(time.Second)
	c.add(next, next.Add(2*time.Millisecond), next.Add(time.Millisecond-time.Hour))
	slot := next.Add(time.Millisecond - time.Hour + 10*time.Millisecond)
	if got, want := c.local(slot), next.Add(11*time.Millisecond); got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("after a step the slot maps to %s, want %s", got, want)
	}
	if got := c.lead(); got > 2*time.Millisecond {
		t.Errorf("lead %s after a step, want the new sample's alone (≤ 2ms)", got)
	}
}

// A reply whose Redis time lies after its arrival on the map, beyond the
// map's error bound, shows Redis's clock stepped forward; one within the
// bound, or before the arrival (a ride that waited), does not. add reports
// a step the same way.
func TestClockMapSeesAStepForward(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	const skew = 5 * time.Second
	c := newClockMap()
	if c.ahead(base, base.Add(time.Hour)) {
		t.Error("an empty map sees a step")
	}
	if c.add(base, base.Add(200*time.Microsecond), base.Add(100*time.Microsecond+skew)) {
		t.Error("the first sample is a step")
	}
	recv := base.Add(10 * time.Millisecond)
	for _, tc := range []struct {
		at   time.Duration // Redis time of the reply, after recv on the true clock
		want bool
	}{
		{-5 * time.Millisecond, false}, // ran long before it arrived (a ride behind a read)
		{0, false},
		{500 * time.Microsecond, false}, // within the bound and the tolerance
		{5 * time.Millisecond, true},
		{time.Minute, true},
	} {
		if got := c.ahead(recv, recv.Add(skew+tc.at)); got != tc.want {
			t.Errorf("reply at %s after its arrival: ahead %v, want %v", tc.at, got, tc.want)
		}
	}
	sent := base.Add(20 * time.Millisecond)
	if !c.add(sent, sent.Add(200*time.Microsecond), sent.Add(100*time.Microsecond+skew+30*time.Millisecond)) {
		t.Error("a sample 30ms ahead of the map is no step")
	}
}
