package pacer

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed replicas.lua
	replicasSrc    string
	replicasScript = redis.NewScript(replicasSrc)
)

// Replica is a replica drawing on the schedule, as it last announced itself.
type Replica struct {
	ID       string
	LastSeen time.Time // Redis clock
	Report   string    // what it reported, e.g. "in_flight=12"
}

// Members is the set of replicas drawing on a schedule: each announces
// itself periodically, and those heard from within a window are live.
// Members are safe for concurrent use.
type Members struct {
	rdb  redis.Scripter
	key  string
	live func(n int) // told the live count after each Announce; may be nil
	p    *Pacer      // the announcing replica's pacer; nil for NewMembers
}

// NewMembers returns the members of the schedule named name on rdb, for
// listing them (an admin command). It never closes rdb.
func NewMembers(rdb redis.Scripter, name string) (*Members, error) {
	if !nameRE.MatchString(name) {
		return nil, fmt.Errorf("%w: pacer.name: %q must be 1-64 letters, digits, '_' or '-'", ErrInvalidConfig, name)
	}
	if rdb == nil {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidConfig)
	}
	return &Members{rdb: rdb, key: replicasKey(name)}, nil
}

// Members returns the members of p's schedule. Announce through it tells p
// how many replicas share the schedule, so that saturated replicas split
// each horizon's slots evenly.
func (p *Pacer) Members() *Members {
	return &Members{rdb: p.rdb, key: replicasKey(p.cfg.Name), live: func(n int) { p.sharers.Store(int64(max(1, n))); p.noteHeard() }, p: p}
}

// Announce records that replica id is alive, with a short report, and
// returns the replicas heard from within window (Redis clock), this one
// included. Replicas silent for longer are forgotten. Through a Pacer's
// Members, the report also says whether this replica's clock is precise
// ("clock=ok"), the call is a clock sample, and the Pacer learns how many
// replicas share the schedule and how many of the others are precise.
func (m *Members) Announce(ctx context.Context, id, report string, window time.Duration) ([]Replica, error) {
	if id == "" {
		return nil, fmt.Errorf("pacer: announce: empty replica id")
	}
	if m.p != nil {
		report = strings.TrimSpace(report + " " + m.p.clockReport())
	}
	sent := time.Now()
	if m.p != nil {
		sent = m.p.cfg.Clock.Now()
	}
	live, now, err := m.replicas(ctx, id, report, window)
	if err != nil {
		return nil, err
	}
	if m.p != nil {
		recv := m.p.cfg.Clock.Now()
		m.p.mu.Lock()
		m.p.sampleLocked(sent, recv, now)
		m.p.mu.Unlock()
		m.p.self.Store(&announced{id: id, window: window})
		m.p.notePeers(id, live)
	}
	if m.live != nil {
		m.live(len(live))
	}
	return live, nil
}

// leaveScript forgets one replica: KEYS[1] the replicas hash, ARGV[1] its
// id. A script because Members holds only a redis.Scripter.
var leaveScript = redis.NewScript(`return redis.call('HDEL', KEYS[1], ARGV[1])`)

// Leave forgets replica id at once, for a replica that stops cleanly
// after its last request: the others count one replica fewer from their
// next Announce, instead of for a whole window more.
func (m *Members) Leave(ctx context.Context, id string) error {
	if err := leaveScript.Run(ctx, m.rdb, []string{m.key}, id).Err(); err != nil {
		return fmt.Errorf("pacer: leave: %w: %w", ErrUnavailable, err)
	}
	return nil
}

// Replicas returns the replicas heard from within window (Redis clock).
func (m *Members) Replicas(ctx context.Context, window time.Duration) ([]Replica, error) {
	live, _, err := m.replicas(ctx, "", "", window)
	return live, err
}

// replicas runs replicas.lua: the live replicas and the Redis time.
func (m *Members) replicas(ctx context.Context, id, report string, window time.Duration) ([]Replica, time.Time, error) {
	v, err := replicasScript.Run(ctx, m.rdb, []string{m.key}, id, report, window.Microseconds()).Result()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pacer: replicas: %w: %w", ErrUnavailable, err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr)%3 != 1 {
		return nil, time.Time{}, fmt.Errorf("pacer: replicas: %w: got %T of %d", ErrBadReply, v, len(arr))
	}
	fields, err := replyStrings(v, len(arr))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pacer: replicas: %w", err)
	}
	now, err := micros(fields[0])
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pacer: replicas: %w", err)
	}
	var out []Replica
	for i := 1; i+2 < len(fields); i += 3 {
		seen, err := micros(fields[i+1])
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("pacer: replicas: %w", err)
		}
		out = append(out, Replica{ID: fields[i], LastSeen: usTime(seen), Report: fields[i+2]})
	}
	return out, usTime(now), nil
}
