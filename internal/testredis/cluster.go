package testredis

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodeTimeout is cluster-node-timeout of the nodes StartCluster
// starts: a master unreachable this long is failed over (in 1 to 3 s).
const clusterNodeTimeout = time.Second

// Cluster is a real Redis Cluster of redis-server processes owned by a
// test: masters with their replicas, on free loopback ports.
type Cluster struct {
	t     testing.TB
	Nodes []*Server
}

// StartCluster starts masters × (1 + replicasPerMaster) redis-server
// processes in cluster mode, joins them with `redis-cli --cluster create
// --cluster-replicas`, waits until every node sees the cluster ok, and
// stops them when the test ends. It skips the test without redis-server
// and redis-cli. A master that stops answering is failed over to its
// replica about a second later (cluster-node-timeout 1s).
func StartCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	requireBinaries(t, "redis-server", "redis-cli")
	if masters < 3 {
		t.Fatalf("testredis: a Redis Cluster needs at least 3 masters, got %d", masters)
	}
	c := &Cluster{t: t}
	args := []string{"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no"}
	for range masters * (1 + replicasPerMaster) {
		c.Nodes = append(c.Nodes, Start(t, Options{clusterNode: true, args: args}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", create...).CombinedOutput(); err != nil {
		t.Fatalf("testredis: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitOK(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Addrs returns every node's host:port.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// Client returns a cluster client seeded with every node, closed when the
// test ends. It reloads the slots' masters every second while used, as
// sluice's own cluster client does, so it finds a new master soon after a
// failover.
func (c *Cluster) Client() *redis.ClusterClient {
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), MaxRedirects: 16,
		ClusterStateReloadInterval: time.Second})
	c.t.Cleanup(func() { _ = rc.Close() })
	return rc
}

// WaitOK waits until every live node reports cluster_state:ok and the same
// master for every slot, or ctx ends.
func (c *Cluster) WaitOK(ctx context.Context) error {
	var last string
	for {
		ok, why := c.ok(ctx)
		if ok {
			return nil
		}
		last = why
		select {
		case <-ctx.Done():
			return fmt.Errorf("testredis: cluster not ok: %s: %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) ok(ctx context.Context) (bool, string) {
	var masters string
	for _, n := range c.Nodes {
		if !n.alive() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		info, err := rc.ClusterInfo(ctx).Result()
		var shards []redis.ClusterShard
		if err == nil {
			shards, err = rc.ClusterShards(ctx).Result()
		}
		_ = rc.Close()
		switch {
		case err != nil:
			return false, fmt.Sprintf("%s: %v", n.Addr(), err)
		case !strings.Contains(info, "cluster_state:ok"):
			return false, n.Addr() + ": cluster_state not ok"
		}
		view := slotMasters(shards)
		if masters == "" {
			masters = view
		} else if view != masters {
			return false, "nodes disagree on the slots' masters"
		}
	}
	return true, ""
}

// slotMasters describes which master serves which slot ranges, in an
// order that does not depend on the node asked.
func slotMasters(shards []redis.ClusterShard) string {
	var view []string
	for _, sh := range shards {
		if m := shardMaster(sh); m != "" {
			view = append(view, fmt.Sprintf("%v:%s", sh.Slots, m))
		}
	}
	slices.Sort(view)
	return strings.Join(view, " ")
}

// shardMaster returns the address of a shard's master, or "".
func shardMaster(sh redis.ClusterShard) string {
	for _, n := range sh.Nodes {
		if n.Role == "master" && n.Health == "online" {
			return net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))
		}
	}
	return ""
}

// MasterFor returns the node that every live node names as master of
// key's slot now; an error when they do not agree or none answers.
func (c *Cluster) MasterFor(ctx context.Context, key string) (*Server, error) {
	var addr string
	for _, n := range c.Nodes {
		if !n.alive() {
			continue
		}
		a, err := n.slotMaster(ctx, key)
		if err != nil {
			return nil, err
		}
		if addr != "" && a != addr {
			return nil, fmt.Errorf("testredis: nodes disagree on the master of %s: %s and %s", key, addr, a)
		}
		addr = a
	}
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("testredis: master of %s is %q, not a node of this cluster", key, addr)
}

// WaitFailover waits until the cluster is ok and every live node names a
// master of key's slot other than old, and returns it.
func (c *Cluster) WaitFailover(ctx context.Context, key string, old *Server) (*Server, error) {
	for {
		if err := c.WaitOK(ctx); err != nil {
			return nil, err
		}
		if m, err := c.MasterFor(ctx, key); err == nil && m != old {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("testredis: no failover of %s from %s: %w", key, old.Addr(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// slotMaster returns the address of the master of key's slot as this node
// sees it.
func (s *Server) slotMaster(ctx context.Context, key string) (string, error) {
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rc.Close()
	slot, err := rc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return "", fmt.Errorf("testredis: %s: keyslot: %w", s.Addr(), err)
	}
	shards, err := rc.ClusterShards(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("testredis: %s: shards: %w", s.Addr(), err)
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start <= slot && slot <= r.End {
				if m := shardMaster(sh); m != "" {
					return m, nil
				}
			}
		}
	}
	return "", fmt.Errorf("testredis: %s: no master for slot %d", s.Addr(), slot)
}

// alive reports whether the server's process runs.
func (s *Server) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil || s.mini != nil
}

// requireBinaries skips t unless every named binary is on the PATH.
func requireBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("testredis: %s not on PATH: %v", n, err)
		}
	}
}
