package pacer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrAside is wrapped by Take's error while this replica stands aside.
var ErrAside = errors.New("pacer: standing aside")

// A replica whose clock map is much less certain than MaxLateness (more
// than asideFactor × MaxLateness: its best recent round trip to Redis is
// over eight times MaxLateness, a slow or lopsided link) cannot place slots
// within the lateness bound: its requests could land up to that
// uncertainty off their slots, among other replicas' slots, and the
// provider would see more than the cap in a short window. (Between one and
// asideFactor × MaxLateness is the jitter of a loaded machine, which every
// replica on it shares; standing aside for it would only make replicas
// flap.)
// While other live replicas have precise clocks, such a replica takes no
// slots: Take returns an error wrapping ErrAside, and the dispatcher
// hands its jobs back for the others to send. A replica that is alone, or
// whose peers are all as uncertain, goes on: its slots are then off by the
// same kind of error as everyone's.
//
// Members announced through a Pacer carry "clock=ok" or "clock=±<bound>" in
// their report; those reports are how replicas learn of each other's
// precision, and each announce is also a clock sample, so that a replica
// standing aside notices when its link has recovered.

// A replica is judged only once its map holds asideSamples round trips;
// until then it would go on, and a replica on a slow link would place its
// first slots up to its uncertainty off, among the others' (a clump at the
// provider as the cluster starts). So a replica whose map is empty, or
// short of samples and less certain than MaxLateness / settledFactor,
// takes no slot yet: it samples the clock at once, round trip after round
// trip (settleClock), learning the live replicas with each, until one
// round trip is fast enough or it holds enough of them (asideSamples for a
// map loose enough to be judged, settleSamples for one that is not), and
// is then judged as above. A replica whose first reply was merely slow (a
// dial, a script load, a host busy starting the cluster) is precise after
// its next fast round trip; one on a slow link knows within asideSamples
// round trips, before its first slot. (Before, a replica took slots with a
// map as loose as asideFactor × MaxLateness from its first round trip: 64
// replicas starting at once on two cores placed their first slots 2–7ms
// off, and the provider saw 52 requests in 100ms under a cap of 500/s in
// 6 runs of 27; docs/operations.md.)

// announced is what the last Members.Announce said of this replica.
type announced struct {
	id     string
	window time.Duration
}

// settleWindow is the live window a probe asks with before this replica
// has announced itself.
const settleWindow = 10 * time.Second

// unsettledLocked reports whether this replica's clock map is empty, or
// less certain than MaxLateness / settledFactor and short of round trips:
// of asideSamples when it is so uncertain that it is to be judged (Aside),
// of settleSamples otherwise.
func (p *Pacer) unsettledLocked(now time.Time) bool {
	if p.clock.n >= settleSamples || p.deg.on {
		return false
	}
	if p.clock.n == 0 {
		return true // no map yet: the first slots need one
	}
	_, u := p.clock.offset(now)
	if u <= p.cfg.MaxLateness/settledFactor {
		return false
	}
	return p.clock.n < asideSamples || !p.imprecise(u)
}

// settleClock samples the clock until the map is settled (see
// unsettledLocked): each sample is one call to the replicas script, which
// also tells how many of the other live replicas are precise.
func (p *Pacer) settleClock(ctx context.Context) error {
	m := p.Members()
	for {
		p.mu.Lock()
		unsettled := p.unsettledLocked(p.cfg.Clock.Now())
		p.mu.Unlock()
		if !unsettled {
			return nil
		}
		self, window := "", settleWindow
		if a := p.self.Load(); a != nil {
			self, window = a.id, a.window
		}
		sent := p.cfg.Clock.Now()
		live, at, err := m.replicas(ctx, "", "", window)
		if err != nil {
			return fmt.Errorf("settle clock: %w", err)
		}
		recv := p.cfg.Clock.Now()
		p.mu.Lock()
		p.sampleLocked(sent, recv, at)
		p.mu.Unlock()
		p.notePeers(self, live)
	}
}

// clockToken is the report token of a replica whose clock is precise.
const clockToken = "clock=ok"

// asideSamples is how many round trips a replica's clock map must hold
// before it may be judged imprecise; asideFactor × MaxLateness is the
// uncertainty past which it is. A map within MaxLateness / settledFactor
// is settled at once (unsettledLocked): the replica's slots are then off
// by at most a quarter of their lateness bound, and are used that far
// inside it (marginLocked). A map less certain than that, but not enough
// to be judged, samples on up to settleSamples round trips: 64 replicas
// starting at once on two cores still had maps within ±2–6ms after eight.
const (
	asideSamples  = 8
	settleSamples = 32
	asideFactor   = 4
	settledFactor = 4
)

// imprecise reports whether an uncertainty u is past the bound.
func (p *Pacer) imprecise(u time.Duration) bool { return u > asideFactor*p.cfg.MaxLateness }

// Aside returns an error wrapping ErrAside while this replica stands aside,
// saying why, and nil otherwise.
func (p *Pacer) Aside() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asideLocked(p.cfg.Clock.Now())
}

func (p *Pacer) asideLocked(now time.Time) error {
	peers := p.precisePeers.Load()
	if peers == 0 || p.clock.n < asideSamples || p.deg.on {
		// Alone or among imprecise peers; too few round trips yet to
		// judge (one slow reply on a loaded machine is not a slow link);
		// or pacing locally while Redis is away, on its own clock.
		return nil
	}
	_, u := p.clock.offset(now)
	if !p.imprecise(u) {
		return nil
	}
	return fmt.Errorf("%w: this replica's clock is mapped to Redis within ±%s only, more than %d × pacer.max_lateness %s "+
		"(its round trips to Redis are slow); %d other live replicas are precise and take the slots",
		ErrAside, u.Round(10*time.Microsecond), asideFactor, p.cfg.MaxLateness, peers)
}

// Precise reports whether this replica's clock map places slots precisely
// enough to take them (true before it holds enough round trips to judge).
func (p *Pacer) Precise() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, u := p.clock.offset(p.cfg.Clock.Now())
	return p.clock.n < asideSamples || !p.imprecise(u)
}

// clockReport is the token this replica adds to its announced report.
func (p *Pacer) clockReport() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, u := p.clock.offset(p.cfg.Clock.Now())
	if p.clock.n < asideSamples || !p.imprecise(u) {
		return clockToken
	}
	return "clock=±" + u.Round(100*time.Microsecond).String()
}

// notePeers counts the live replicas other than self whose report says
// their clock is precise.
func (p *Pacer) notePeers(self string, live []Replica) {
	n := 0
	for _, r := range live {
		if r.ID != self && strings.Contains(" "+r.Report+" ", " "+clockToken+" ") {
			n++
		}
	}
	p.precisePeers.Store(int64(n))
}
