package testredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testredis"
)

// A 3-master cluster with one replica each serves a key through a cluster
// client, and keeps it after the master of its slot is killed: the replica
// takes over.
func TestClusterFailover(t *testing.T) {
	c := testredis.StartCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := c.Client()
	const key = "sluice:{t}:k"
	if err := rc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	master, err := c.MasterFor(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	node, err := rc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := node.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}
	master.Kill()
	if _, err := c.WaitFailover(ctx, key, master); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Get(ctx, key).Result(); err != nil || got != "v" {
		t.Fatalf("after failover: got %q, %v; want v", got, err)
	}
}

// The sentinels fail a killed master over to its replica, which keeps what
// was written.
func TestSentinelFailover(t *testing.T) {
	g := testredis.StartSentinelGroup(t, testredis.SentinelOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rc := g.Client()
	if err := rc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: got %d, %v; want 1 replica", n, err)
	}
	if a, err := g.MasterAddr(ctx); err != nil || a != g.Master.Addr() {
		t.Fatalf("master: got %s, %v; want %s", a, err, g.Master.Addr())
	}
	g.Master.Kill()
	if err := g.WaitMaster(ctx, g.Replica.Addr()); err != nil {
		t.Fatal(err)
	}
	if got, err := rc.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("after failover: got %q, %v; want v", got, err)
	}
}
