package pacer

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/testredis"
)

// slowClock gives p's clock map only samples of a slow round trip, as a
// slow link to Redis would: its offset is known to ±rtt/2.
func slowClock(p *Pacer, rtt time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clock = newClockMap()
	now := time.Now()
	for range asideSamples {
		p.clock.add(now.Add(-rtt), now, now.Add(-rtt/2))
	}
}

// dropHeld waits for p's refill in flight, if any, and drops the slots p
// holds, so that its next Take asks for more, where standing aside is
// judged. Slots are placed when granted, by the clock map of that moment,
// and a replica that comes to stand aside still spends those it holds.
func dropHeld(p *Pacer) {
	p.mu.Lock()
	ch := p.refilling
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
	p.mu.Lock()
	p.buf = nil
	p.mu.Unlock()
}

// A replica whose clock is uncertain beyond MaxLateness takes no slot
// while a precise peer is live; alone, it goes on; precise again, it
// takes slots again. Reports say which replicas are precise.
func TestImpreciseReplicaStandsAside(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	cfg := Config{Name: "aside", Rate: 100}
	slow, fast := newClientPacer(t, srv, cfg), newClientPacer(t, srv, cfg)
	ctx := context.Background()
	announce := func(p *Pacer, id string) []Replica {
		t.Helper()
		live, err := p.Members().Announce(ctx, id, "in_flight=0", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return live
	}
	// Alone, the uncertain replica goes on.
	announce(slow, "slow")
	slowClock(slow, 40*time.Millisecond)
	if err := slow.Aside(); err != nil {
		t.Fatalf("alone: Aside = %v, want nil", err)
	}
	if _, err := slow.Take(ctx, 1); err != nil {
		t.Fatalf("alone: Take = %v", err)
	}
	// A precise peer announces; the uncertain one learns it at its next announce.
	announce(fast, "fast")
	dropHeld(slow)                       // the slots it took alone (placed then) are not what is judged here
	slowClock(slow, 40*time.Millisecond) // the announce was a fast sample here; keep the link slow
	live := announce(slow, "slow")
	slowClock(slow, 40*time.Millisecond)
	var reports []string
	for _, r := range live {
		reports = append(reports, r.ID+": "+r.Report)
	}
	if got := strings.Join(reports, "; "); !strings.Contains(got, "fast: in_flight=0 clock=ok") {
		t.Errorf("reports %q: want the precise peer's clock=ok", got)
	}
	err := slow.Aside()
	if !errors.Is(err, ErrAside) || !strings.Contains(err.Error(), "max_lateness") {
		t.Fatalf("with a precise peer: Aside = %v, want ErrAside naming max_lateness", err)
	}
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := slow.Take(tctx, 1); !errors.Is(err, ErrAside) {
		t.Errorf("with a precise peer: Take = %v, want ErrAside", err)
	}
	if _, err := fast.Take(ctx, 1); err != nil {
		t.Errorf("the precise peer: Take = %v", err)
	}
	// A single slow reply is not judged: a replica needs asideSamples
	// round trips before it can stand aside.
	slow.mu.Lock()
	slow.clock = newClockMap()
	slow.clock.add(time.Now().Add(-40*time.Millisecond), time.Now(), time.Now())
	slow.mu.Unlock()
	if err := slow.Aside(); err != nil {
		t.Errorf("one slow round trip: Aside = %v, want nil", err)
	}
	// The link recovers: a fast sample makes it precise again.
	slowClock(slow, 40*time.Millisecond)
	announce(slow, "slow")
	if err := slow.Aside(); err != nil {
		t.Errorf("after a fast round trip: Aside = %v, want nil", err)
	}
}

// A replica that starts on a slow link takes no slot before its clock is
// judged: it samples the clock at once, round trip after round trip, and
// stands aside beside a precise peer before it has placed a single slot
// up to its uncertainty off. (Judged only by the samples its slots gave
// it, it would have taken its first slots with a ±40ms map.)
func TestSlowStarterSettlesBeforeItsFirstSlot(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	cfg := Config{Name: "settle", Rate: 100}
	fast := newClientPacer(t, srv, cfg)
	ctx := context.Background()
	if _, err := fast.Members().Announce(ctx, "fast", "", time.Minute); err != nil {
		t.Fatal(err)
	}

	slow, err := New(slowLink(t, srv, 40*time.Millisecond), cfg)
	if err != nil {
		t.Fatal(err)
	}

	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if st, err := slow.Take(tctx, 1); !errors.Is(err, ErrAside) {
		t.Fatalf("first Take on a slow link beside a precise peer = %v, %v; want ErrAside before any slot", st, err)
	}
	slow.mu.Lock()
	samples, held := slow.clock.n, len(slow.buf)
	slow.mu.Unlock()
	if samples < asideSamples || held != 0 {
		t.Errorf("after standing aside: %d clock samples, %d slots held; want at least %d and none", samples, held, asideSamples)
	}
	// The schedule is untouched: the precise peer's first slot is now,
	// not a horizon of the slow replica's slots later.
	st, err := fast.Take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if wait := time.Until(st.At); wait > 20*time.Millisecond {
		t.Errorf("the precise peer's first slot is %v away; want about now (the slow replica reserved none)", wait)
	}
}

// A replica whose first round trips are slow, but not slow enough to stand
// aside (a host busy starting the cluster), takes no slot with the loose
// clock map they give: it samples again until a fast round trip places
// its clock within a quarter of MaxLateness, whose error its slots then
// leave inside.
func TestLooseStarterSettlesBeforeItsFirstSlot(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{})
	cfg := Config{Name: "loose", Rate: 100, MaxLateness: 8 * time.Millisecond}
	// Redis knows the scripts already (another queue's replica ran them),
	// so that each call is one round trip.
	warm := newClientPacer(t, srv, Config{Name: "warm", Rate: 100})
	if _, err := warm.Take(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	rdb, link := slowLinkProxy(t, srv, 12*time.Millisecond)
	// The link turns fast after the second script call: the first two round
	// trips, delayed on the way back, place the clock 6ms late, past
	// MaxLateness/4 (2ms) but within asideFactor × MaxLateness (32ms).
	rdb.AddHook(&afterCalls{n: 2, then: func() {
		if err := link.Toxics.RemoveToxic(context.Background(), "delay"); err != nil {
			t.Error(err)
		}
	}})
	p, err := New(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.Take(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Redis runs on this host's clock: a slot's true moment here is its
	// stamp. Placed by the loose map, the slot would open 6ms after it and
	// close 6ms past MaxLateness.
	from, until := st.At.Round(0).Sub(st.Stamp), st.Deadline.Round(0).Sub(st.Stamp)
	if from < 0 || until > cfg.MaxLateness {
		t.Errorf("first slot may leave from %v to %v after its true moment; want within 0 and %v (clock known to ±%v)",
			from, until, cfg.MaxLateness, p.Stats().ClockUncertainty)
	}
}

// A link delayed one way cannot be told from a clock offset: the map
// places the replica's slots up to half the round trip off, early or
// late. Each slot is used inside that error at both ends, so that wherever
// the truth lies, its request leaves within MaxLateness after the slot's
// true moment and never before it. Redis runs on this host's clock: a
// slot's true moment here is its stamp.
func TestSlotsLeaveInsideTheClockError(t *testing.T) {
	for _, stream := range []string{"upstream", "downstream"} {
		t.Run(stream, func(t *testing.T) {
			srv := testredis.Start(t, testredis.Options{})
			cfg := Config{Name: "lopsided", Rate: 100, MaxLateness: 8 * time.Millisecond}
			rdb, _ := lopsidedLink(t, srv, stream, 3*time.Millisecond)
			p, err := New(rdb, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i := range 5 {
				st, err := p.Take(ctx, 1)
				if err != nil {
					t.Fatal(err)
				}
				from, until := st.At.Round(0).Sub(st.Stamp), st.Deadline.Round(0).Sub(st.Stamp)
				if from < 0 || until > cfg.MaxLateness {
					u := p.Stats().ClockUncertainty
					t.Errorf("slot %d may leave from %v to %v after its true moment; want within 0 and %v (clock known to ±%v)",
						i, from, until, cfg.MaxLateness, u)
				}
			}
		})
	}
}

// afterCalls is a go-redis hook that runs then once, after the n-th
// script call (EVAL or EVALSHA, alone or in a pipeline) has succeeded.
type afterCalls struct {
	n     int
	calls atomic.Int64
	once  sync.Once
	then  func()
}

func (h *afterCalls) note() {
	if h.calls.Add(1) >= int64(h.n) {
		h.once.Do(h.then)
	}
}

func (h *afterCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *afterCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && isScript(cmd) {
			h.note()
		}
		return err
	}
}

func (h *afterCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil && slices.ContainsFunc(cmds, isScript) {
			h.note()
		}
		return err
	}
}

// isScript reports whether cmd runs a script (EVAL or EVALSHA).
func isScript(cmd redis.Cmder) bool { return strings.HasPrefix(cmd.Name(), "eval") }
