package testnats_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluicehq/sluice/internal/testnats"
)

// A stream with three replicas on nats-server processes survives a kill -9
// of its leader: another node leads it with every acknowledged message,
// and the killed node, started again on its store, is a current replica
// again.
func TestProcClusterKillLeader(t *testing.T) {
	c := testnats.StartProcCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
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
	killed := time.Now()
	leader.Kill()
	if leader.Running() {
		t.Fatalf("%s still running after Kill", leader)
	}

	var info *jetstream.StreamInfo
	waitFor(ctx, t, "a new leader of S with the 10 messages", func() (bool, error) {
		var err error
		info, err = streamInfo(ctx, js, "S")
		if err != nil {
			return false, err
		}
		return info.Cluster.Leader != "" && info.Cluster.Leader != leader.Name() && info.State.Msgs == 10, nil
	})
	t.Logf("stream S: leader %s killed, %s leads after %s", leader, info.Cluster.Leader, time.Since(killed).Round(time.Millisecond))
	if l := c.StreamLeader("S"); l == nil || l == leader {
		t.Fatalf("StreamLeader(S) after the kill: %v; want a node other than %s", l, leader)
	}
	if _, err := js.Publish(ctx, "s.x", []byte("m")); err != nil {
		t.Fatalf("publish with %s down: %v", leader, err)
	}

	restarted := time.Now()
	leader.Restart()
	waitFor(ctx, t, leader.Name()+" a current replica of S again", func() (bool, error) {
		info, err := streamInfo(ctx, js, "S")
		if err != nil {
			return false, err
		}
		for _, r := range info.Cluster.Replicas {
			if r.Name == leader.Name() {
				return r.Current && !r.Offline && r.Lag == 0, nil
			}
		}
		return false, nil
	})
	t.Logf("%s current again %s after its restart", leader, time.Since(restarted).Round(time.Millisecond))
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// streamInfo asks for a stream's info with a bound of its own: a request
// sent while the client reconnects gets no answer.
func streamInfo(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// waitFor polls cond until it holds, failing t when ctx ends first.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	for {
		ok, err := cond()
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last error: %v)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestStartProc: a standalone nats-server process takes a JetStream
// stream, answers on its monitoring port, and is gone after Kill.
func TestStartProc(t *testing.T) {
	n := testnats.StartProc(t)
	if n.PID() == 0 {
		t.Fatal("no process id")
	}
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "one", Subjects: []string{"one.>"}}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "one.a", []byte("x")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	resp, err := http.Get(n.MonitorURL() + "/varz")
	if err != nil {
		t.Fatalf("varz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("varz: %s", resp.Status)
	}
	n.Kill()
	if n.Running() {
		t.Fatal("still running after Kill")
	}
}
