package redisq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// Tuning of the backend.
const (
	// group is the consumer group of every lane stream.
	group = "sluice"
	// enqueueChunk bounds the jobs stored by one script call.
	enqueueChunk = 500
	// promoteLimit bounds the due-later jobs one fetch promotes.
	promoteLimit = 1000
	// blockSlice bounds one blocking read, so that a Fetch notices its
	// context ending or the queue closing, and promotes due-later jobs and
	// claims timed-out ones, at least this often.
	blockSlice = 500 * time.Millisecond
	// closeTimeout bounds the clean-up that Close does in Redis.
	closeTimeout = 2 * time.Second
	// defaultListLimit is ListDead's limit when it is given none.
	defaultListLimit = 100
	// maxScanRest bounds how long the scan for timed-out deliveries rests
	// after a pass over a lane's pending entries (fetch.lua).
	maxScanRest = time.Second
)

// scanRest is how long the scan for timed-out deliveries of a lane rests
// after a pass over its pending entries: a tenth of the visibility timeout,
// at most maxScanRest, so that a delivery is claimed at most that much
// after it timed out, and fetches in between scan nothing.
func (q *Queue) scanRest() time.Duration {
	return max(min(q.cfg.VisibilityTimeout/10, maxScanRest), time.Millisecond)
}

var _ queue.Queue = (*Queue)(nil)

// Queue is a queue.Queue on Redis Streams. It is safe for concurrent use.
// See the package documentation for how jobs are stored.
type Queue struct {
	client  redis.UniversalClient
	cfg     queue.Config
	keys    keys
	scripts *scripts
	log     *slog.Logger

	minReplicas    int           // WithMinReplicas: replicas each enqueue waits for
	replicaTimeout time.Duration // and for how long
	ride           func() Rider  // WithRider: what to send behind each blocking read
	keepLanes      bool          // WithKeepLanes: Requeue leaves dead letters of lanes not in cfg.Lanes

	takesMu   sync.Mutex
	takes     map[string]laneTake // per lane, the last round of fetch.lua (fetch.go)
	takeEvery time.Duration       // takeEvery; tests change it

	closeOnce sync.Once
	closed    chan struct{}
	mu        sync.Mutex     // orders fetches.Add and bg.Add before Close's Wait
	fetches   sync.WaitGroup // running Fetch calls, waited for by Close
	sweeping  bool           // the clean-up loop was started (under mu)
	bg        sync.WaitGroup // the clean-up loop, waited for by Close
}

// Option changes how New builds a Queue.
type Option func(*Queue)

// WithLogger sets the logger of the queue's background clean-up of idle
// consumers (see Sweep). The default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(q *Queue) { q.log = l } }

// New returns a queue on client configured by cfg: it applies cfg's
// defaults and validates it, reporting every problem. New does not talk to
// Redis: each lane's consumer group is created when first needed. The queue
// never closes client.
func New(client redis.UniversalClient, cfg queue.Config, opts ...Option) (*Queue, error) {
	if client == nil {
		return nil, fmt.Errorf("redisq: new: %w: nil redis client", queue.ErrInvalidConfig)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("redisq: new: %w", err)
	}
	cfg.Lanes = slices.Clone(cfg.Lanes)
	if cfg.Consumer == "" {
		cfg.Consumer = defaultConsumer()
	}
	q := &Queue{
		client:  client,
		cfg:     cfg,
		keys:    newKeys(cfg.Name),
		scripts: newScripts(),
		log:     slog.Default(),
		closed:  make(chan struct{}),
		takes:   map[string]laneTake{}, takeEvery: takeEvery,
	}
	for _, o := range opts {
		o(q)
	}
	if q.log == nil {
		q.log = slog.Default()
	}
	return q, nil
}

// defaultConsumer names a consumer after the host, the process and a random
// suffix, so that two replicas on one host differ.
func defaultConsumer() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(rand.Uint64()&0xffffff, 36)
}

// Consumer returns the name of this queue's consumer in the lanes' groups.
func (q *Queue) Consumer() string { return q.cfg.Consumer }

// Close stops the queue: blocked Fetch calls return queue.ErrClosed within
// a block slice (half a second), and Close waits for them and for the
// clean-up of idle consumers, so the client may be closed once Close
// returns; later calls fail with queue.ErrClosed. Close removes this
// consumer from the lanes' groups where it holds no job. It does not close
// the Redis client. Closing again does nothing and returns nil.
func (q *Queue) Close() error {
	var err error
	q.closeOnce.Do(func() {
		q.mu.Lock()
		close(q.closed)
		q.mu.Unlock()
		q.fetches.Wait()
		q.bg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err = q.scripts.forget.Run(ctx, q.client, q.keys.lanes(q.cfg.Lanes), group, q.cfg.Consumer).Err()
		if err != nil {
			err = fmt.Errorf("redisq: close: forget consumer %s: %w", q.cfg.Consumer, err)
		}
	})
	return err
}

// startFetch registers a running Fetch, or returns queue.ErrClosed after
// Close. The caller calls q.fetches.Done when the Fetch returns. The first
// call starts the clean-up of idle consumers (see Sweep): a queue that only
// enqueues or inspects leaves the groups alone.
func (q *Queue) startFetch() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.live(context.Background()); err != nil {
		return err
	}
	q.fetches.Add(1)
	if !q.sweeping && q.cfg.ConsumerIdleLimit > 0 {
		q.sweeping = true
		q.bg.Add(1)
		go q.sweepLoop()
	}
	return nil
}

// live returns queue.ErrClosed after Close, else ctx's error.
func (q *Queue) live(ctx context.Context) error {
	select {
	case <-q.closed:
		return queue.ErrClosed
	default:
		return ctx.Err()
	}
}

// Enqueue implements queue.Enqueuer. A batch is stored by one script call
// per 500 jobs, each call atomic; jobs with a NotBefore later than Redis'
// clock wait in their lane's due-later set.
func (q *Queue) Enqueue(ctx context.Context, jobs ...*queue.Job) ([]queue.EnqueueResult, error) {
	if err := q.live(ctx); err != nil {
		return nil, fmt.Errorf("redisq: enqueue: %w", err)
	}
	if err := queue.Prepare(&q.cfg, q.cfg.Now(), jobs); err != nil {
		return nil, fmt.Errorf("redisq: enqueue: %w", err)
	}
	res := make([]queue.EnqueueResult, 0, len(jobs))
	for chunk := range slices.Chunk(jobs, enqueueChunk) {
		r, err := q.enqueue(ctx, chunk)
		if err != nil {
			return res, fmt.Errorf("redisq: enqueue: %w", err)
		}
		res = append(res, r...)
	}
	return res, nil
}

// enqueue stores prepared jobs with one script call, or one XADD (plain).
func (q *Queue) enqueue(ctx context.Context, jobs []*queue.Job) ([]queue.EnqueueResult, error) {
	if len(jobs) == 1 && q.minReplicas <= 0 && jobs[0].Key == "" && jobs[0].NotBefore.IsZero() {
		return q.plain(ctx, jobs[0])
	}
	L := len(q.cfg.Lanes)
	keys := append(q.keys.lanes(q.cfg.Lanes), q.keys.delayedSets(q.cfg.Lanes)...)
	args := make([]any, 0, 2+6*len(jobs))
	args = append(args, L, windowMillis(q.cfg.DedupWindow))
	for _, j := range jobs {
		body, err := json.Marshal(j)
		if err != nil {
			return nil, fmt.Errorf("encode job %s: %w", j.ID, err)
		}
		dk := 0
		if j.Key != "" {
			keys = append(keys, q.keys.dedup(j.Key))
			dk = len(keys)
		}
		var nb int64 // due time in Unix ms, rounded up: never early
		if !j.NotBefore.IsZero() {
			nb = j.NotBefore.UnixMilli()
			if j.NotBefore.Nanosecond()%int(time.Millisecond) != 0 {
				nb++
			}
			nb = max(nb, 1)
		}
		args = append(args, slices.Index(q.cfg.Lanes, j.Lane)+1, dk, nb, j.ID, token(), body)
	}
	v, err := q.runEnqueue(ctx, keys, args)
	if v == nil {
		return nil, err
	}
	r := newReply(v, 0, 2)
	if r.err == nil && r.len() != 2*len(jobs) {
		return nil, fmt.Errorf("%w: %d values for %d jobs", errReply, r.len(), len(jobs))
	}
	res := make([]queue.EnqueueResult, len(jobs))
	for i := range res {
		res[i] = queue.EnqueueResult{Duplicate: r.int(2*i) == 1, ID: r.str(2*i + 1)}
	}
	if r.err != nil {
		return nil, r.err
	}
	if err != nil { // stored, not confirmed by the replicas: not acknowledged
		return nil, err
	}
	return res, nil
}

// windowMillis returns the dedup window d in whole ms for enqueue.lua's
// SET ... PX, rounded up: Redis refuses PX 0, after the script has stored
// the batch's earlier jobs, so a positive window under 1ms (which
// queue.Config.Validate refuses) is kept for 1ms rather than failing half
// a batch.
func windowMillis(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > time.Duration(ms)*time.Millisecond {
		ms++
	}
	return max(ms, 1)
}

// plain stores one job that needs nothing of enqueue.lua (no idempotency
// key to hold, no due time to compare with Redis' clock, no replicas to
// wait for) with the XADD the script would run: the same entry (keep the
// two alike), without a script's cost in Redis on the way from a producer
// to a waiting fetch (BenchmarkEnqueue: 1.1 µs of Redis per job against
// 14.7 µs for a keyed one through the script).
func (q *Queue) plain(ctx context.Context, j *queue.Job) ([]queue.EnqueueResult, error) {
	body, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("encode job %s: %w", j.ID, err)
	}
	err = q.client.XAdd(ctx, &redis.XAddArgs{
		Stream: q.keys.lane(j.Lane),
		Values: []any{"a", 0, "id", j.ID, "j", body},
	}).Err()
	if err != nil {
		return nil, err
	}
	return []queue.EnqueueResult{{ID: j.ID}}, nil
}

// token returns a unique token that keeps two equal jobs apart in a
// due-later set.
func token() string { return strconv.FormatUint(rand.Uint64(), 16) }

// Stats implements queue.Inspector, reading every count at one moment of
// Redis' clock. Ready counts jobs due now, including due-later jobs already
// due that the next Fetch of their lane promotes. InFlight counts fetched,
// unsettled jobs, including those past their visibility timeout that no
// Fetch has claimed yet. OldestAge runs from when the oldest ready job last
// became ready: its enqueue, its retry's due time or its requeue.
func (q *Queue) Stats(ctx context.Context) (queue.Stats, error) {
	keys := append(q.keys.lanes(q.cfg.Lanes), q.keys.delayedSets(q.cfg.Lanes)...)
	keys = append(keys, q.keys.dead())
	v, err := q.scripts.stats.Run(ctx, q.client, keys, group).Result()
	if err != nil {
		return queue.Stats{}, fmt.Errorf("redisq: stats: %w", err)
	}
	r := newReply(v, 1, 4)
	if r.err == nil && r.len() != 1+4*len(q.cfg.Lanes) {
		r.err = fmt.Errorf("%w: %d values for %d lanes", errReply, r.len(), len(q.cfg.Lanes))
	}
	st := queue.Stats{DeadLetters: r.int(0), Lanes: make([]queue.LaneStats, len(q.cfg.Lanes))}
	for i, lane := range q.cfg.Lanes {
		st.Lanes[i] = queue.LaneStats{
			Lane:      lane,
			Ready:     r.int(1 + 4*i),
			Delayed:   r.int(2 + 4*i),
			InFlight:  r.int(3 + 4*i),
			OldestAge: time.Duration(r.int(4+4*i)) * time.Millisecond,
		}
	}
	if r.err != nil {
		return queue.Stats{}, fmt.Errorf("redisq: stats: %w", r.err)
	}
	return st, nil
}

// isNoGroup reports whether err says that a lane's consumer group is missing
// (a new lane, or a Redis that lost its data). Redis answers a script's
// failing call with the NOGROUP error itself; miniredis (the demo's embedded
// Redis) wraps it in a script error, so the code is looked for inside too.
func isNoGroup(err error) bool {
	var rerr redis.Error
	return redis.HasErrorPrefix(err, "NOGROUP") ||
		(errors.As(err, &rerr) && strings.Contains(rerr.Error(), "NOGROUP No such key"))
}

// ensureGroup creates the consumer group of lane, reading from the start of
// its stream, unless it exists.
func (q *Queue) ensureGroup(ctx context.Context, lane string) error {
	err := q.client.XGroupCreateMkStream(ctx, q.keys.lane(lane), group, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("create group of lane %s: %w", lane, err)
	}
	return nil
}
