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
	// announced[i] is the address Nodes[i] announced when the cluster
	// formed (ClusterOptions.Link), or its own.
	announced []string
}

// ClusterOptions say how StartClusterWith starts a cluster.
type ClusterOptions struct {
	// Masters is how many masters hold the slots: at least 3.
	Masters int
	// ReplicasPerMaster is how many replicas each master has.
	ReplicasPerMaster int
	// Link, when set, is given each node's address before the cluster
	// forms and returns a 127.0.0.1 address in front of it (a proxy) that
	// the node then announces as its own (CONFIG SET
	// cluster-announce-port): clients redirected to the node, and the
	// node's replicas, which replicate from the address the cluster
	// gossips, go through it, so that it can slow or cut replication.
	// The cluster bus stays direct. The setting is not kept across
	// Restart: a node brought back announces its own address again, as a
	// host that failed with its link comes back without it.
	Link func(nodeAddr string) string
}

// StartCluster starts masters × (1 + replicasPerMaster) redis-server
// processes in cluster mode, joins them with `redis-cli --cluster create
// --cluster-replicas`, waits until every node sees the cluster ok, and
// stops them when the test ends. It skips the test without redis-server
// and redis-cli. A master that stops answering is failed over to its
// replica about a second later (cluster-node-timeout 1s).
func StartCluster(t testing.TB, masters, replicasPerMaster int) *Cluster {
	t.Helper()
	return StartClusterWith(t, ClusterOptions{Masters: masters, ReplicasPerMaster: replicasPerMaster})
}

// StartClusterWith is StartCluster with options. With a Link it also
// waits until every replica replicates through its master's link.
func StartClusterWith(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	requireBinaries(t, "redis-server", "redis-cli")
	if opts.Masters < 3 {
		t.Fatalf("testredis: a Redis Cluster needs at least 3 masters, got %d", opts.Masters)
	}
	c := &Cluster{t: t}
	args := []string{"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
		"--cluster-replica-validity-factor", "0", "--cluster-allow-replica-migration", "no"}
	for range opts.Masters * (1 + opts.ReplicasPerMaster) {
		c.Nodes = append(c.Nodes, Start(t, Options{clusterNode: true, args: args}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		addr := n.Addr()
		if opts.Link != nil {
			var err error
			if addr, err = n.announce(ctx, opts.Link(addr)); err != nil {
				t.Fatal(err)
			}
		}
		c.announced = append(c.announced, addr)
	}
	create := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		create = append(create, n.Addr())
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(opts.ReplicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", create...).CombinedOutput(); err != nil {
		t.Fatalf("testredis: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := c.WaitOK(ctx); err != nil {
		t.Fatal(err)
	}
	if opts.Link != nil {
		if err := c.waitLinked(ctx, opts.Masters*opts.ReplicasPerMaster); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// announce makes the node announce link (host:port on 127.0.0.1) as its
// address to the cluster, and returns link.
func (s *Server) announce(ctx context.Context, link string) (string, error) {
	host, port, err := net.SplitHostPort(link)
	if err != nil || host != "127.0.0.1" {
		return "", fmt.Errorf("testredis: link %q of %s: want 127.0.0.1:port (%v)", link, s.Addr(), err)
	}
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "cluster-announce-port", port).Err(); err != nil {
		return "", fmt.Errorf("testredis: %s: announce %s: %w", s.Addr(), link, err)
	}
	return link, nil
}

// waitLinked waits until each of the cluster's replicas replicates, link
// up, from the address its master announced: a replica is first told the
// address its master was met at, and the announced one with the master's
// next ping.
func (c *Cluster) waitLinked(ctx context.Context, replicas int) error {
	announced := map[string]bool{}
	for _, a := range c.announced {
		announced[a] = true
	}
	for {
		linked, why := 0, fmt.Sprintf("fewer than %d replicas", replicas)
		for _, n := range c.Nodes {
			from, up, err := n.replicaOf(ctx)
			switch {
			case err != nil:
				why = err.Error()
			case from == "": // a master
			case announced[from] && up:
				linked++
			default:
				why = fmt.Sprintf("%s replicates from %s (link up: %t), not yet through a link", n.Addr(), from, up)
			}
		}
		if linked == replicas {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testredis: replicas not linked: %s: %w", why, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replicaOf returns the master address a replica replicates from and
// whether its link is up; "" for a master.
func (s *Server) replicaOf(ctx context.Context) (string, bool, error) {
	rc := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rc.Close()
	info, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return "", false, fmt.Errorf("testredis: %s: info replication: %w", s.Addr(), err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	if fields["role"] != "slave" {
		return "", false, nil
	}
	return net.JoinHostPort(fields["master_host"], fields["master_port"]), fields["master_link_status"] == "up", nil
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
	for i, n := range c.Nodes {
		if n.Addr() == addr || c.announced[i] == addr {
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
