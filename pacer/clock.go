package pacer

import (
	"slices"
	"time"
)

// clockMap maps the Redis clock to this replica's clock. Each Redis call is
// a sample: sent at local time s, answered at local time r, run at Redis
// time R somewhere in between. As NTP does, the map trusts the sample with
// the smallest error bound, half its round trip plus a drift allowance for
// its age, and places R at the sample's midpoint: a slow reply widens only
// its own sample's bound, so it cannot shift the slots it carries.
//
// It also tracks how long replies take to arrive after Redis ran the
// script (the lead a caller needs so that its slots are still ahead when
// the reply lands).
//
// clockMap is not safe for concurrent use; the Pacer guards it.
type clockMap struct {
	samples [clockSamples]clockSample
	n, next int
	best    int // index of the sample the map uses; -1 before the first
	leads   [leadSamples]time.Duration
	nlead   int
}

// clockSample is one round trip to Redis.
type clockSample struct {
	mid   time.Time     // local midpoint of the round trip (monotonic)
	redis time.Time     // Redis time the script read
	rtt   time.Duration // round trip
}

const (
	// clockSamples is how many recent round trips the map remembers.
	clockSamples = 64
	// driftPerSecond bounds how fast two hosts' clocks drift apart (50
	// ppm, generous for NTP-disciplined clocks): a sample's error bound
	// grows by it with age.
	driftPerSecond = 50 * time.Microsecond
	// leadSamples is how many recent replies the lead is the worst of.
	leadSamples = 8
	// stepTolerance is how far a sample may disagree with the map, beyond
	// both error bounds, before the map counts a clock step.
	stepTolerance = time.Millisecond
)

func newClockMap() *clockMap { return &clockMap{best: -1} }

// add records a round trip: sent at s, answered at r, the script ran at
// Redis time at. It reports whether the sample showed a step of the
// clocks, after which the map starts over from it.
func (c *clockMap) add(s, r, at time.Time) (stepped bool) {
	rtt := max(r.Sub(s), 0)
	smp := clockSample{mid: s.Add(rtt / 2), redis: at, rtt: rtt}
	if c.stepped(smp) {
		// One of the clocks stepped (an operator or NTP set it): the old
		// samples describe another clock; start over.
		c.reset()
		stepped = true
	}
	c.samples[c.next] = smp
	c.next = (c.next + 1) % clockSamples
	c.n = min(c.n+1, clockSamples)
	c.best = c.pick(r)
	c.addLead(r, at)
	return stepped
}

// reset forgets every sample.
func (c *clockMap) reset() { c.n, c.next, c.nlead, c.best = 0, 0, 0, -1 }

// ahead reports whether Redis time at, read by a call whose reply arrived
// at local time r, lies after r on the map beyond its error bound (and a
// millisecond's tolerance): Redis's clock stepped forward. It needs no
// sending time, so it serves a ride's reply, which is no clock sample.
func (c *clockMap) ahead(r, at time.Time) bool {
	if c.best < 0 {
		return false
	}
	return c.local(at).Sub(r) > c.samples[c.best].bound(r)+stepTolerance
}

// addLead records how long after the script ran at Redis time at (on the
// mapped clock) its reply arrived, at r: also for a reply that is no clock
// sample (a ride's, whose sending time says nothing of when it ran).
func (c *clockMap) addLead(r, at time.Time) {
	c.leads[c.nlead%leadSamples] = max(r.Sub(c.local(at)), 0)
	c.nlead++
}

// stepped reports whether smp contradicts the map beyond both error bounds
// (and a millisecond's tolerance): the map no longer describes the clocks.
func (c *clockMap) stepped(smp clockSample) bool {
	if c.best < 0 {
		return false
	}
	// Where the map puts the sample's Redis time, against where the sample
	// itself puts it.
	diff := smp.mid.Sub(c.local(smp.redis))
	if diff < 0 {
		diff = -diff
	}
	return diff > c.samples[c.best].bound(smp.mid)+smp.rtt/2+stepTolerance
}

// pick returns the index of the sample with the smallest error bound at now.
func (c *clockMap) pick(now time.Time) int {
	best, bound := -1, time.Duration(0)
	for i := range c.n {
		if b := c.samples[i].bound(now); best < 0 || b < bound {
			best, bound = i, b
		}
	}
	return best
}

// bound is the sample's error bound at now.
func (s clockSample) bound(now time.Time) time.Duration {
	age := max(now.Sub(s.mid), 0)
	return s.rtt/2 + time.Duration(age.Seconds()*float64(driftPerSecond))
}

// local maps Redis time at to this replica's clock. Before any sample it
// returns at unchanged.
func (c *clockMap) local(at time.Time) time.Time {
	if c.best < 0 {
		return at
	}
	b := c.samples[c.best]
	return b.mid.Add(at.Sub(b.redis))
}

// offset is the Redis clock minus this replica's clock, and its error
// bound at now.
func (c *clockMap) offset(now time.Time) (offset, uncertainty time.Duration) {
	if c.best < 0 {
		return 0, 0
	}
	b := c.samples[c.best]
	return b.redis.Sub(b.mid.Round(0)), b.bound(now)
}

// lead is the longest recent delay from the script's run to its reply's
// arrival: a caller asks for no slot closer than that.
func (c *clockMap) lead() time.Duration {
	var worst time.Duration
	for i := range min(c.nlead, leadSamples) {
		worst = max(worst, c.leads[i])
	}
	return worst
}

// typicalLead is the median of the same recent delays (the higher of the
// two middle ones): what most replies took, which one stall of this
// replica does not raise.
func (c *clockMap) typicalLead() time.Duration {
	n := min(c.nlead, leadSamples)
	if n == 0 {
		return 0
	}
	var d [leadSamples]time.Duration
	copy(d[:], c.leads[:n])
	slices.Sort(d[:n])
	return d[n/2]
}
