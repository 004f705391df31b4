package config

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testredis"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// With redis.cluster_addrs the client is a cluster client, and the pacer
// and the Redis queue work on a real Redis Cluster: every script's keys
// share one hash slot.
func TestRedisCluster(t *testing.T) {
	srv := testredis.Start(t, testredis.Options{Cluster: true})
	testredis.RequireReal(t, srv)
	cfg, rdb := loadClient(t, map[string]string{"redis.url": srv.URL(), "redis.cluster_addrs": srv.Addr()})
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("client is %T, want *redis.ClusterClient", rdb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := pacer.New(rdb, cfg.PacerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Reserve(ctx, 1); err != nil || r.Granted != 1 {
		t.Fatalf("pacer on the cluster: %+v, %v", r, err)
	}
	qc := cfg.QueueConfig()
	qc.Consumer = "c1"
	q, err := redisq.New(rdb, qc)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Enqueue(ctx, &queue.Job{Key: "k1", Payload: json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Fetch(ctx, "default", 1)
	if err != nil {
		t.Fatal(err)
	}
	if dead, err := ds[0].Retry(ctx, time.Millisecond, "again"); err != nil || dead {
		t.Fatalf("retry on the cluster: %v, %v", dead, err)
	}
	if ds, err = q.Fetch(ctx, "default", 1); err != nil {
		t.Fatal(err)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatalf("ack on the cluster: %v", err)
	}
}

// With redis.sentinel the client finds the master through the sentinels.
func TestRedisSentinel(t *testing.T) {
	master := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, master)
	sen := testredis.StartSentinel(t, master, "sluice-master")
	cfg, rdb := loadClient(t, map[string]string{"redis.url": "redis://ignored:6379/0",
		"redis.sentinel.master_name": "sluice-master", "redis.sentinel.addrs": sen.Addr})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := pacer.New(rdb, cfg.PacerConfig())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Reserve(ctx, 1); err != nil || r.Granted != 1 {
		t.Fatalf("pacer through the sentinel: %+v, %v", r, err)
	}
	if n, err := master.Client().Exists(ctx, "sluice:{sms}:pacer").Result(); err != nil || n != 1 {
		t.Errorf("the schedule is not on the master the sentinel names: %d, %v", n, err)
	}
}

// topologyBase are the keys every topology test needs besides redis.*.
var topologyBase = map[string]string{"queue.name": "sms", "pacer.rate": "100", "sink.url": "http://127.0.0.1:1/"}

// loadClient loads topologyBase with set and returns the config and its
// Redis client, closed when the test ends.
func loadClient(t *testing.T, set map[string]string) (*Config, redis.UniversalClient) {
	t.Helper()
	flags := maps.Clone(topologyBase)
	maps.Copy(flags, set)
	cfg, err := Load("", nil, flags)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := cfg.RedisClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return cfg, rdb
}

func TestRedisTopologyValidation(t *testing.T) {
	for _, tt := range []struct {
		set  map[string]string
		keys []string
	}{
		{map[string]string{"redis.cluster_addrs": "nohost"}, []string{"redis.cluster_addrs[0]"}},
		{map[string]string{"redis.cluster_addrs": "127.0.0.1:7000", "redis.url": "redis://127.0.0.1:7001/2"}, []string{"redis.url"}},
		{map[string]string{"redis.sentinel.master_name": "m"}, []string{"redis.sentinel.addrs"}},
		{map[string]string{"redis.sentinel.addrs": "127.0.0.1:26379"}, []string{"redis.sentinel.master_name"}},
		{map[string]string{"redis.sentinel.master_name": "m", "redis.sentinel.addrs": "127.0.0.1:26379", "redis.cluster_addrs": "127.0.0.1:7000"}, []string{"redis.sentinel"}},
		{map[string]string{"redis.min_replicas_acked": "-1"}, []string{"redis.min_replicas_acked"}},
		{map[string]string{"redis.min_replicas_acked": "17"}, []string{"redis.min_replicas_acked"}},
		{map[string]string{"redis.min_replicas_timeout": "3s"}, []string{"redis.min_replicas_timeout"}},
		{map[string]string{"redis.min_replicas_timeout": "-1ms"}, []string{"redis.min_replicas_timeout"}},
		{map[string]string{"redis.min_replicas_timeout": "500us"}, []string{"redis.min_replicas_timeout"}},
		{map[string]string{"nats.replicas": "6"}, []string{"nats.replicas"}},
		{map[string]string{"nats.replicas": "-1"}, []string{"nats.replicas"}},
		{map[string]string{"redis.sentinel.master_name": "m", "redis.sentinel.addrs": "127.0.0.1:26379",
			"redis.sentinel.password_file": "/no/such/sentinel-password"}, []string{"redis.sentinel.password_file"}},
		{map[string]string{"redis.sentinel.master_name": "m", "redis.sentinel.addrs": "127.0.0.1:26379",
			"redis.sentinel.password_file": writeFile(t, "sentinel-pw", " \n")}, []string{"redis.sentinel.password_file"}},
	} {
		flags := maps.Clone(topologyBase)
		maps.Copy(flags, tt.set)
		_, err := Load("", nil, flags)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%v: got %v, want ErrInvalid", tt.set, err)
			continue
		}
		for _, k := range tt.keys {
			if !strings.Contains(err.Error(), k+":") {
				t.Errorf("%v: error does not name %s:\n%v", tt.set, k, err)
			}
		}
	}
}

// The replication keys have their defaults, and take what is given.
func TestReplicationKeys(t *testing.T) {
	cfg, err := Load("", nil, maps.Clone(topologyBase))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.MinReplicasAcked != 0 || cfg.Redis.MinReplicasTimeout != DefaultMinReplicasTimeout || cfg.NATS.Replicas != 1 {
		t.Errorf("defaults: got min_replicas_acked %d, min_replicas_timeout %s, nats.replicas %d; want 0, %s, 1",
			cfg.Redis.MinReplicasAcked, cfg.Redis.MinReplicasTimeout, cfg.NATS.Replicas, DefaultMinReplicasTimeout)
	}
	flags := maps.Clone(topologyBase)
	maps.Copy(flags, map[string]string{"redis.min_replicas_acked": "1", "redis.min_replicas_timeout": "250ms", "nats.replicas": "3"})
	if cfg, err = Load("", nil, flags); err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.MinReplicasAcked != 1 || cfg.Redis.MinReplicasTimeout != 250*time.Millisecond || cfg.NATS.Replicas != 3 {
		t.Errorf("set: got min_replicas_acked %d, min_replicas_timeout %s, nats.replicas %d; want 1, 250ms, 3",
			cfg.Redis.MinReplicasAcked, cfg.Redis.MinReplicasTimeout, cfg.NATS.Replicas)
	}
}
