package testnats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
)

// A stream with three replicas keeps every acknowledged message when its
// leader shuts down: another server leads it.
func TestClusterLeaderLoss(t *testing.T) {
	c := testnats.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	js, err := jetstream.New(c.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := js.Publish(ctx, "s.x", []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.StreamLeader("S")
	if leader == nil {
		t.Fatal("no leader of stream S")
	}
	leader.Shutdown()
	var n uint64
	var last error
	for ctx.Err() == nil && n != 10 {
		// Each call is bounded: a request sent while the client reconnects
		// gets no answer.
		one, stop := context.WithTimeout(ctx, 2*time.Second)
		s, err := js.Stream(one, "S")
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = s.Info(one); err == nil {
				n = info.State.Msgs
			}
		}
		stop()
		last = err
		if n != 10 {
			time.Sleep(50 * time.Millisecond) // poll interval
		}
	}
	if n != 10 {
		t.Fatalf("after the leader shut down: %d messages (last error %v); want 10", n, last)
	}
	if l := c.StreamLeader("S"); l == nil || l == leader {
		t.Fatalf("stream S leader after shutdown: %v; want another server", l)
	}
}
