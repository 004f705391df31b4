package pacer_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/pacer"
)

// Every replica that sends to the provider creates a Pacer with the same
// Name and Rate, on the same Redis; together they send at most Rate
// requests per second.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	p, err := pacer.New(rdb, pacer.Config{Name: "sms", Rate: 400})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.Wait(ctx); err != nil {
		fmt.Println(err) // no slot: Redis unreachable (the pacer fails closed) or ctx ended
		return
	}
	// The slot is ours: send one request now.
}

// A configuration with a missing name and an impossible rate is refused,
// every problem named.
func ExampleNew_invalid() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	_, err := pacer.New(rdb, pacer.Config{Rate: -5})
	fmt.Println(err)
	// Output:
	// pacer: invalid config: pacer.name: "" must be 1-64 letters, digits, '_' or '-'
	// pacer: invalid config: pacer.rate: must be between 0.001 and 10000000 slots/s, got -5
}
