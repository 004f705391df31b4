package natsq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Releases. Release gives a job back with a Nak, which keeps the job's
// place at the front of its lane but which JetStream counts as one more
// delivery (NumDelivered). So that a release spends no attempt, as on the
// Redis backend, the queue counts each message's releases in a key-value
// bucket (SLUICE_RELEASED_<queue>), and a fetch takes them off the
// message's NumDelivered. Only a message delivered before (NumDelivered
// above 1) is looked up, so a job's first delivery costs nothing more; the
// bucket is made by the first Release, and its entries expire after
// releasedTTL. Without the entry (the write failed, or it expired) the
// release counts as an attempt, as a visibility timeout does.

// releasedTTL is how long a message's release count is kept: longer than a
// released job waits before it is fetched again (at once, unless every
// dispatcher is down).
const releasedTTL = 7 * 24 * time.Hour

// releasedRecheck is how long a queue that found no bucket waits before it
// looks again, so that redeliveries do not each cost a lookup.
const releasedRecheck = time.Second

// releases is a queue's view of its bucket of release counts.
type releases struct {
	mu      sync.Mutex
	kv      jetstream.KeyValue // nil until found or made
	missing time.Time          // when the bucket was last found missing
}

func (n names) released() string { return "SLUICE_RELEASED_" + n.queue }

// releaseKey names a message's count: its stream sequence and the time it
// was stored, so that a stream made again, whose sequences start over,
// never reads another message's count.
func releaseKey(seq uint64, stored time.Time) string {
	return strconv.FormatUint(seq, 10) + "-" + strconv.FormatInt(stored.UnixNano(), 10)
}

// releaseBucket returns the bucket of release counts, made when create is
// set; nil and no error when it does not exist and create is not set.
func (q *Queue) releaseBucket(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	r := &q.released
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kv != nil {
		return r.kv, nil
	}
	if !create && !r.missing.IsZero() && time.Since(r.missing) < releasedRecheck {
		return nil, nil
	}
	kv, err := q.js.KeyValue(ctx, q.n.released())
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		replicas := 1 // as many as the lanes' stream has
		if info := q.stream.CachedInfo(); info != nil {
			replicas = max(info.Config.Replicas, 1)
		}
		kv, err = q.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      q.n.released(),
			Description: "sluice: releases per message of queue " + q.cfg.Name + ", taken off its delivery count",
			History:     1,
			TTL:         releasedTTL,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		})
	}
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		r.missing = time.Now()
		return nil, nil
	case err != nil:
		return nil, err
	}
	r.kv = kv
	return kv, nil
}

// releaseCount reads how many times the message was released; 0 when
// never, or when the count cannot be read (it then counts as attempts).
func (q *Queue) releaseCount(ctx context.Context, seq uint64, stored time.Time) int {
	kv, err := q.releaseBucket(ctx, false)
	if err != nil || kv == nil {
		if err != nil {
			q.log.Warn("natsq: read release count", "queue", q.cfg.Name, "seq", seq, "err", err)
		}
		return 0
	}
	e, err := kv.Get(ctx, releaseKey(seq, stored))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			q.log.Warn("natsq: read release count", "queue", q.cfg.Name, "seq", seq, "err", err)
		}
		return 0
	}
	n, err := strconv.Atoi(string(e.Value()))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// noteRelease records that the message was released once more than the
// count its delivery was fetched with.
func (q *Queue) noteRelease(ctx context.Context, d *delivery) error {
	kv, err := q.releaseBucket(ctx, true)
	if err != nil {
		return fmt.Errorf("natsq: release count: %w", err)
	}
	if _, err := kv.Put(ctx, releaseKey(d.seq, d.stored), []byte(strconv.Itoa(d.released+1))); err != nil {
		return fmt.Errorf("natsq: release count: %w", err)
	}
	return nil
}
