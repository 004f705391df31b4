package natsq_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/natsq"
	"github.com/sluicehq/sluice/queue/queuetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// features are what natsq claims in the conformance suite.
var features = queuetest.Features{
	// The first job's id is returned only while its message is still in
	// the stream; after its ack the dedup window still holds the key but
	// JetStream no longer has the id.
	OriginalIDOnDuplicate: false,
	// Detected locally from the visibility deadline (see delivery.go).
	StaleSettleUndetected: false,
}

func TestConformance(t *testing.T) {
	srv := testnats.Start(t)
	queuetest.Run(t, factory(srv.Conn, false), features)
}

// TestConformanceExternal runs the suite against the server at
// $SLUICE_TEST_NATS_URL (for instance an older nats-server binary started
// on a free port), and is skipped without it.
func TestConformanceExternal(t *testing.T) {
	url := os.Getenv("SLUICE_TEST_NATS_URL")
	if url == "" {
		t.Skip("SLUICE_TEST_NATS_URL is not set")
	}
	conn := func() *nats.Conn {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatalf("connect %s: %v", url, err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	queuetest.Run(t, factory(conn, true), features)
}

// factory opens each queue on its own connection, as replicas do. With
// tidy, it deletes the queue's streams when the test ends, for a server
// that outlives the test.
func factory(conn func() *nats.Conn, tidy bool) queuetest.Factory {
	return func(t *testing.T, cfg queue.Config) queue.Queue {
		t.Helper()
		q, js := open(t, conn(), cfg)
		if tidy {
			t.Cleanup(func() {
				_ = q.Close() // first, so that its mover does not see the streams go
				deleteStreams(t, js, q)
			})
		}
		return q
	}
}

// open builds a Queue on nc and closes it when the test ends.
func open(t testing.TB, nc *nats.Conn, cfg queue.Config) (*natsq.Queue, jetstream.JetStream) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := natsq.New(ctx, js, cfg)
	if err != nil {
		t.Fatalf("natsq.New: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, js
}

// deleteStreams removes a queue's streams, so that a shared server does
// not keep them.
func deleteStreams(t testing.TB, js jetstream.JetStream, q *natsq.Queue) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{"SLUICE_" + q.Config().Name, "SLUICEDLQ_" + q.Config().Name, "KV_SLUICE_RELEASED_" + q.Config().Name} {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Logf("delete stream %s: %v", name, err)
		}
	}
}
