package pacer

import (
	"context"
	_ "embed"
	"fmt"
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

// Announce records that replica id is alive, with a short report, and
// returns the replicas heard from within window (Redis clock), this one
// included. Replicas silent for longer are forgotten.
func (p *Pacer) Announce(ctx context.Context, id, report string, window time.Duration) ([]Replica, error) {
	if id == "" {
		return nil, fmt.Errorf("pacer: announce: empty replica id")
	}
	live, err := p.replicas(ctx, id, report, window)
	if err == nil {
		// Batches share the horizon among the live replicas.
		p.sharers.Store(int64(max(1, len(live))))
	}
	return live, err
}

// Replicas returns the replicas heard from within window (Redis clock).
func (p *Pacer) Replicas(ctx context.Context, window time.Duration) ([]Replica, error) {
	return p.replicas(ctx, "", "", window)
}

func (p *Pacer) replicas(ctx context.Context, id, report string, window time.Duration) ([]Replica, error) {
	v, err := replicasScript.Run(ctx, p.rdb, []string{replicasKey(p.cfg.Name)}, id, report, window.Microseconds()).Result()
	if err != nil {
		return nil, fmt.Errorf("pacer: replicas: %w: %w", ErrUnavailable, err)
	}
	arr, ok := v.([]any)
	if !ok || len(arr)%3 != 1 {
		return nil, fmt.Errorf("pacer: replicas: %w: got %T of %d", ErrBadReply, v, len(arr))
	}
	fields, err := replyStrings(v, len(arr))
	if err != nil {
		return nil, fmt.Errorf("pacer: replicas: %w", err)
	}
	var out []Replica
	for i := 1; i+2 < len(fields); i += 3 {
		seen, err := micros(fields[i+1])
		if err != nil {
			return nil, fmt.Errorf("pacer: replicas: %w", err)
		}
		out = append(out, Replica{ID: fields[i], LastSeen: usTime(seen), Report: fields[i+2]})
	}
	return out, nil
}
