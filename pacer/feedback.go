package pacer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Answer is one provider answer as Feedback counts it: throttling (429,
// 503) or not, and the Retry-After it carried.
type Answer struct {
	Throttled  bool
	RetryAfter time.Duration // zero when none
}

// Event is a change of the effective rate or a hold, made by one report.
type Event string

// Events of a report (adapt.lua).
const (
	// EventCut: a window was throttled beyond the tolerance; the rate fell
	// to what the provider accepted.
	EventCut Event = "cut"
	// EventUndo: the window after a cut was throttled as much: the
	// throttling does not follow the rate, so the cut was undone and the
	// share is tolerated.
	EventUndo Event = "undo"
	// EventRaise: a clean window; the rate climbed toward the ceiling.
	EventRaise Event = "raise"
	// EventHold: the first Retry-After of an episode holds the schedule.
	EventHold Event = "hold"
)

// Adaptation is the cluster's effective rate and its history, as the last
// report left it.
type Adaptation struct {
	Rate      float64   // the effective rate, slots per second
	Ceiling   float64   // the configured rate, or the operator's override
	Episode   bool      // the provider is pushing back: Rate may be under Ceiling
	HeldUntil time.Time // the last hold's end, Redis time; zero when never
	LastCut   time.Time // Redis time; zero when never
	Cuts      int64     // cuts so far, whole cluster
	Holds     int64     // holds so far, whole cluster
	// Tolerated is the share of throttling answers found not to follow the
	// rate (a provider that refuses some requests whatever the pace); the
	// rate does not react to it.
	Tolerated float64
}

// FeedbackStats are what this replica's reports did.
type FeedbackStats struct {
	Reports int64 // Redis calls made
	Cuts    int64 // cuts this replica's reports made (undos not counted)
	Undos   int64
	Holds   int64
	Errors  int64 // reports that failed; their answers are dropped
}

// Feedback carries one replica's provider answers to the cluster-wide
// schedule, so that the effective rate follows what the provider accepts:
// down at once when it throttles, back up step by step when it stops.
// Observe counts an answer; Run sends the counts to Redis every
// FeedbackEvery (at once for the first throttling answer of an episode,
// so that a Retry-After holds the cluster without delay), where adapt.lua
// judges the whole cluster's answers once per Adaptive.Window. See
// adapt.lua for the rule.
//
// Each change is logged once, by the replica whose report made it. A
// Feedback is safe for concurrent use.
type Feedback struct {
	rdb redis.Scripter
	key string
	cfg Config
	log *slog.Logger

	mu  sync.Mutex
	ok  int64
	thr int64
	ra  time.Duration

	kick  chan struct{}
	state atomic.Pointer[Adaptation]

	reports, cuts, undos, holds, errs atomic.Int64
}

// FeedbackEvery is how often Run reports the answers counted since the
// last report.
const FeedbackEvery = 100 * time.Millisecond

// Feedback returns a Feedback on p's schedule, logging to log (nil for
// slog.Default). Make one per replica and Run it.
func (p *Pacer) Feedback(log *slog.Logger) *Feedback {
	if log == nil {
		log = slog.Default()
	}
	f := &Feedback{rdb: p.rdb, key: p.key, cfg: p.cfg, log: log, kick: make(chan struct{}, 1)}
	f.state.Store(&Adaptation{Rate: p.cfg.Rate, Ceiling: p.cfg.Rate})
	return f
}

// Observe counts one answer. It never blocks.
func (f *Feedback) Observe(a Answer) {
	f.mu.Lock()
	if a.Throttled {
		f.thr++
		f.ra = max(f.ra, a.RetryAfter)
	} else {
		f.ok++
	}
	f.mu.Unlock()
	if a.Throttled && !f.state.Load().Episode {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Run reports until ctx ends, then makes a last report.
func (f *Feedback) Run(ctx context.Context) {
	t := time.NewTicker(FeedbackEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = f.Report(fctx)
			cancel()
			return
		case <-t.C:
		case <-f.kick:
		}
		if _, err := f.Report(ctx); err != nil && ctx.Err() == nil {
			f.log.Debug("pacer: feedback: report failed; its answers are dropped", "err", err)
		}
	}
}

// Report sends the answers counted since the last report and returns the
// adaptation they left. With nothing to report it reports nothing and
// returns the last known state. Run calls it; tests may call it directly.
func (f *Feedback) Report(ctx context.Context) (Adaptation, error) {
	f.mu.Lock()
	ok, thr, ra := f.ok, f.thr, f.ra
	f.ok, f.thr, f.ra = 0, 0, 0
	f.mu.Unlock()
	if ok == 0 && thr == 0 {
		return *f.state.Load(), nil
	}
	a := f.cfg.Adaptive
	f.reports.Add(1)
	v, err := adaptScript.Run(ctx, f.rdb, []string{f.key},
		f.cfg.Rate, ok, thr, ra.Microseconds(), a.Window.Microseconds(), a.Tolerance, a.Increase, a.Floor,
		a.MaxHold.Microseconds(), max(f.cfg.Headroom, 0)).Result()
	if err != nil {
		f.errs.Add(1)
		return *f.state.Load(), fmt.Errorf("pacer: feedback: %w: %w", ErrUnavailable, err)
	}
	st, ev, before, share, err := parseAdaptation(v)
	if err != nil {
		f.errs.Add(1)
		return *f.state.Load(), fmt.Errorf("pacer: feedback: %w", err)
	}
	f.state.Store(&st)
	f.note(st, ev, before, share)
	return st, nil
}

// note counts and logs the change this replica's report made.
func (f *Feedback) note(st Adaptation, ev Event, before float64, share string) {
	switch ev {
	case EventCut:
		f.cuts.Add(1)
		f.log.Warn("pacer: the provider throttles; cluster rate cut", "from", round(before), "to", round(st.Rate),
			"ceiling", round(st.Ceiling), "throttled_share", share)
	case EventUndo:
		f.undos.Add(1)
		f.log.Info("pacer: throttling does not follow the rate; cut undone and the share tolerated",
			"rate", round(st.Rate), "tolerated_share", share)
	case EventHold:
		f.holds.Add(1)
		f.log.Warn("pacer: the provider asked to wait (Retry-After); cluster holds", "until", st.HeldUntil.UTC().Format(time.RFC3339Nano),
			"max_hold", f.cfg.Adaptive.MaxHold)
	case EventRaise:
		if st.Rate >= st.Ceiling {
			f.log.Info("pacer: clean answers; cluster rate back at the ceiling", "rate", round(st.Rate))
		} else {
			f.log.Debug("pacer: clean answers; cluster rate raised", "from", round(before), "to", round(st.Rate))
		}
	}
}

// State returns the adaptation as this replica's last report left it.
func (f *Feedback) State() Adaptation { return *f.state.Load() }

// Stats returns what this replica's reports did.
func (f *Feedback) Stats() FeedbackStats {
	return FeedbackStats{Reports: f.reports.Load(), Cuts: f.cuts.Load(), Undos: f.undos.Load(),
		Holds: f.holds.Load(), Errors: f.errs.Load()}
}

func round(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

func parseAdaptation(v any) (Adaptation, Event, float64, string, error) {
	fs, err := replyStrings(v, 11)
	if err != nil {
		return Adaptation{}, "", 0, "", err
	}
	ev, share := Event(fs[2]), fs[4]
	fs[2], fs[4], fs[8] = "", "", ""
	n, err := parseFields(fs)
	if err != nil {
		return Adaptation{}, "", 0, "", err
	}
	st := Adaptation{Rate: n[0], Ceiling: n[1], HeldUntil: usTime(n[5]), Cuts: int64(n[6]), Holds: int64(n[7]),
		LastCut: usTime(n[9]), Tolerated: n[10]}
	st.Episode = v.([]any)[8] == "1"
	return st, ev, n[3], share, nil
}
