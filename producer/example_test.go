package producer_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/producer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

func Example() {
	// An in-memory Redis keeps the example self-contained; an application
	// passes its own client.
	m, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()

	lanes := priority.Config{
		Lanes:           []priority.Lane{{Name: "vip"}, {Name: "default"}},
		PrivilegedUsers: []string{"alice"},
	}
	q, err := redisq.New(rdb, queue.Config{Name: "sms", Lanes: lanes.LaneNames()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Close()
	p, err := producer.New(q, lanes)
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx := context.Background()
	for _, line := range []string{
		`{"user": "alice", "key": "otp-42", "payload": {"to": "+15550100", "text": "code 123456"}}`,
		`{"user": "bob", "payload": {"to": "+15550101", "text": "hello"}}`,
		`{"user": "alice", "key": "otp-42", "payload": {"to": "+15550100", "text": "code 123456"}}`,
		`{"user": "bob", "lane": "urgent", "payload": {}}`,
		`{"user": "bob", "not_before": "tomorrow", "payload": {}}`,
	} {
		job, err := producer.ParseJob([]byte(line))
		if err != nil {
			fmt.Println("refused:", err)
			continue
		}
		res, err := p.Enqueue(ctx, job)
		switch {
		case errors.Is(err, queue.ErrInvalidJob):
			fmt.Println("refused by the queue:", err)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println("lane", job.Lane, "duplicate", res.Duplicate)
		}
	}
	// Output:
	// lane vip duplicate false
	// lane default duplicate false
	// lane vip duplicate true
	// refused by the queue: producer: enqueue: redisq: enqueue: lane: unknown lane "urgent" (lanes: [vip default])
	// refused: not_before: must be an RFC 3339 time (2026-11-21T10:00:00Z), got "tomorrow"
}
