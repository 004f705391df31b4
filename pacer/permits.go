package pacer

import (
	"context"
	_ "embed"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed permits.lua
	permitsSrc    string
	permitsScript = redis.NewScript(permitsSrc)
)

// permitsKey is the sorted set of the cluster's permits.
func permitsKey(name string) string { return "sluice:{" + name + "}:permits" }

// Permits caps the requests open to the provider across every replica
// (sink.max_in_flight_total), for providers that limit open connections
// as well as rate. A permit is a member of a sorted set in Redis, scored
// by its lease expiry: a replica acquires permits in small batches, keeps
// them alive with a heartbeat (Run) while it holds them, and gives back
// the ones it has not used for a moment; a replica that dies stops
// renewing, and its permits come back when their lease expires. Acquire
// fails closed: while Redis cannot be reached, no permit is granted.
//
// The cap holds as long as a live replica's heartbeat reaches Redis within
// each lease, and the provider ends a dead replica's requests within a
// lease (its connections closed when the process died).
//
// Permits are safe for concurrent use.
type Permits struct {
	rdb   redis.Scripter
	key   string
	id    string // this replica's prefix for permit names
	max   int
	lease time.Duration
	log   *slog.Logger

	mu   sync.Mutex
	seq  int64
	held map[string]bool      // every permit this replica holds
	idle map[string]time.Time // held and not in use, since when
}

// Defaults of Permits.
const (
	// permitBatch is the most permits one call acquires.
	permitBatch = 4
	// permitIdle is how long a permit stays unused before it is given back.
	permitIdle = 20 * time.Millisecond
	// permitPoll bounds the wait before asking again when none is free.
	permitPoll = 20 * time.Millisecond
)

// NewPermits returns the permits of the schedule named name, at most max
// held at once in the cluster, each leased for lease; id names this
// replica's permits (unique per process). It never closes rdb.
func NewPermits(rdb redis.Scripter, name, id string, max int, lease time.Duration, log *slog.Logger) (*Permits, error) {
	switch {
	case !nameRE.MatchString(name):
		return nil, fmt.Errorf("%w: pacer.name: %q must be 1-64 letters, digits, '_' or '-'", ErrInvalidConfig, name)
	case rdb == nil:
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	case max < 1:
		return nil, fmt.Errorf("%w: sink.max_in_flight_total: must be at least 1, got %d", ErrInvalidConfig, max)
	case lease < 100*time.Millisecond:
		return nil, fmt.Errorf("%w: permit lease must be at least 100ms, got %s", ErrInvalidConfig, lease)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Permits{rdb: rdb, key: permitsKey(name), id: id, max: max, lease: lease, log: log,
		held: map[string]bool{}, idle: map[string]time.Time{}}, nil
}

// Acquire blocks until this replica holds a permit for one request, and
// returns the function that gives it back once the provider's answer is
// in (call it exactly once). It returns ctx's error when ctx ends first,
// and an error wrapping ErrUnavailable when Redis fails.
func (p *Permits) Acquire(ctx context.Context) (release func(), err error) {
	wait := time.Millisecond
	for {
		if name, ok := p.takeIdle(); ok {
			return p.releaser(name), nil
		}
		got, err := p.acquire(ctx)
		if err != nil {
			return nil, err
		}
		if got {
			continue
		}
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, fmt.Errorf("pacer: permit: %w", err)
		}
		wait = min(2*wait, permitPoll)
	}
}

// takeIdle takes one of this replica's idle permits.
func (p *Permits) takeIdle() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.idle {
		delete(p.idle, name)
		return name, true
	}
	return "", false
}

// releaser returns the function that makes name idle again.
func (p *Permits) releaser(name string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			if p.held[name] {
				p.idle[name] = time.Now()
			}
			p.mu.Unlock()
		})
	}
}

// acquire asks Redis for a batch of permits; false when none was free.
func (p *Permits) acquire(ctx context.Context) (bool, error) {
	p.mu.Lock()
	args := []any{"acquire", p.max, p.lease.Milliseconds()}
	for range permitBatch {
		p.seq++
		args = append(args, p.id+":"+strconv.FormatInt(p.seq, 10))
	}
	p.mu.Unlock()
	names, err := p.run(ctx, "acquire", args)
	if err != nil {
		return false, err
	}
	now := time.Now()
	p.mu.Lock()
	for _, n := range names {
		p.held[n] = true
		p.idle[n] = now
	}
	p.mu.Unlock()
	return len(names) > 0, nil
}

// Run renews this replica's permits every third of the lease and gives
// back those idle for a moment, until ctx ends; then it gives back every
// permit it holds.
func (p *Permits) Run(ctx context.Context) {
	renew := time.NewTicker(p.lease / 3)
	defer renew.Stop()
	trim := time.NewTicker(permitIdle)
	defer trim.Stop()
	defer p.giveBack(true)
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			p.renew(ctx)
		case <-trim.C:
			p.giveBack(false)
		}
	}
}

// renew extends the leases of every permit held; permits found expired
// are forgotten.
func (p *Permits) renew(ctx context.Context) {
	p.mu.Lock()
	args := []any{"renew", p.max, p.lease.Milliseconds()}
	for n := range p.held {
		args = append(args, n)
	}
	p.mu.Unlock()
	if len(args) == 3 {
		return
	}
	lost, err := p.run(ctx, "renew", args)
	if err != nil {
		p.log.Warn("pacer: could not renew the permits' leases", "err", err)
		return
	}
	if len(lost) > 0 {
		p.log.Warn("pacer: permits expired before their renewal (Redis unreachable for a lease?)", "count", len(lost))
	}
	p.mu.Lock()
	for _, n := range lost {
		delete(p.held, n)
		delete(p.idle, n)
	}
	p.mu.Unlock()
}

// giveBack returns to Redis the permits idle for permitIdle (all idle
// ones when all is set, at shutdown).
func (p *Permits) giveBack(all bool) {
	now := time.Now()
	p.mu.Lock()
	args := []any{"release", 0, 0}
	for n, since := range p.idle {
		if all || now.Sub(since) >= permitIdle {
			args = append(args, n)
			delete(p.idle, n)
			delete(p.held, n)
		}
	}
	p.mu.Unlock()
	if len(args) == 3 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := p.run(ctx, "release", args); err != nil {
		p.log.Debug("pacer: could not give permits back; they come back when their lease ends", "err", err)
	}
}

// Held returns how many permits this replica holds, in use or idle.
func (p *Permits) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)
}

// run runs permits.lua and returns the names it answered with.
func (p *Permits) run(ctx context.Context, op string, args []any) ([]string, error) {
	v, err := permitsScript.Run(ctx, p.rdb, []string{p.key}, args...).Result()
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("pacer: permits %s: %w", op, cerr)
		}
		return nil, fmt.Errorf("pacer: permits %s: %w: %w", op, ErrUnavailable, err)
	}
	if _, ok := v.(int64); ok {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("pacer: permits %s: %w: got %T", op, ErrBadReply, v)
	}
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("pacer: permits %s: %w: element %T", op, ErrBadReply, x)
		}
		out = append(out, s)
	}
	return out, nil
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
