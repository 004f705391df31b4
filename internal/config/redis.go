package config

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the redis: section: the pacer's store, and the queue's when the
// backend is redis.
type Redis struct {
	// URL is redis://[user:password@]host:port/db, rediss://... for TLS,
	// or unix:///path/to/socket; go-redis's URL options (dial_timeout=...)
	// are accepted as query parameters. Zero means
	// redis://127.0.0.1:6379/0. Its password is hidden from Redacted.
	URL string `yaml:"url"`
	// PasswordFile names a file holding the password, trimmed of
	// surrounding white space. Optional; not together with a password in
	// the URL.
	PasswordFile string `yaml:"password_file"`
	// TLS configures TLS; the URL must then be rediss://.
	TLS TLS `yaml:"tls"`
	// ClusterAddrs are further nodes of a Redis Cluster (host:port): with
	// them the client is a cluster client, seeded with redis.url's node and
	// these. Every key sluice uses carries the queue name as its hash tag,
	// so each script runs on one node. Optional; database must be 0.
	ClusterAddrs []string `yaml:"cluster_addrs"`
	// Sentinel finds the master through Redis Sentinel; redis.url then
	// gives the credentials, database and TLS, and its host is ignored.
	// Optional; not together with cluster_addrs.
	Sentinel Sentinel `yaml:"sentinel"`
	// MinReplicasAcked makes every enqueue wait, once its jobs are stored
	// on the master, until that many replicas confirm them (Redis WAIT on
	// the same connection). An enqueue they do not confirm within
	// MinReplicasTimeout fails, so that the producer retries: a job is
	// acknowledged only once a failover cannot lose it. Zero (the
	// default) means no wait: replication stays asynchronous and a
	// failover may lose jobs acknowledged just before it. At most 16.
	MinReplicasAcked int `yaml:"min_replicas_acked"`
	// MinReplicasTimeout bounds that wait. Zero means 100ms; at most 2s,
	// under the client's read timeout.
	MinReplicasTimeout time.Duration `yaml:"min_replicas_timeout"`
}

// ClusterStateReloadInterval is how often a Redis Cluster client asks the
// cluster which node is master of each slot, while it is used: a bound on
// how long it keeps sending to a master that a failover replaced.
const ClusterStateReloadInterval = time.Second

// Bounds of redis.min_replicas_acked and redis.min_replicas_timeout.
const (
	DefaultMinReplicasTimeout = 100 * time.Millisecond
	MaxMinReplicasAcked       = 16
	MaxMinReplicasTimeout     = 2 * time.Second
)

// Sentinel configures Redis Sentinel.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the master under.
	// Setting it turns Sentinel on.
	MasterName string `yaml:"master_name"`
	// Addrs are the sentinels (host:port). Required with master_name.
	Addrs []string `yaml:"addrs"`
	// PasswordFile names a file holding the sentinels' own password, if
	// they have one, trimmed of surrounding white space. Optional; read at
	// load, as the other password files are.
	PasswordFile string `yaml:"password_file"`
}

// RedisOptions returns the options of a client for redis.url: address,
// database, user and password (from the URL or redis.password_file), TLS
// (rediss://, with redis.tls's files) and go-redis's URL options. It reads
// the files each time it is called. Its error matches ErrInvalid and names
// no secret.
func (c *Config) RedisOptions() (*redis.Options, error) {
	opts, ps := c.redisOptions()
	if len(ps) > 0 {
		return nil, joinProblems(ps)
	}
	return opts, nil
}

// RedisClient returns a new client for redis.url, as RedisOptions
// configures it. The caller closes it. It does not connect: the first
// command does.
//
// With redis.cluster_addrs it returns a cluster client, with
// redis.sentinel a client that finds the master through the sentinels.
func (c *Config) RedisClient() (redis.UniversalClient, error) {
	opts, err := c.RedisOptions()
	if err != nil {
		return nil, err
	}
	r := &c.Redis
	switch {
	case len(r.ClusterAddrs) > 0:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: append([]string{opts.Addr}, r.ClusterAddrs...), Username: opts.Username, Password: opts.Password,
			TLSConfig: opts.TLSConfig, DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout,
			WriteTimeout: opts.WriteTimeout, PoolSize: opts.PoolSize,
			// go-redis reloads the slots' masters on MOVED, but not when the
			// master it knows stops answering; by default it would keep
			// dialling a killed master for up to a minute after its replica
			// took over.
			ClusterStateReloadInterval: ClusterStateReloadInterval,
		}), nil
	case r.Sentinel.MasterName != "":
		var sentinelPassword string
		if f := r.Sentinel.PasswordFile; f != "" {
			pw, p := readSecretFile("redis.sentinel.password_file", f)
			if p != nil {
				return nil, joinProblems([]*problem{p})
			}
			sentinelPassword = pw
		}
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: r.Sentinel.MasterName, SentinelAddrs: r.Sentinel.Addrs, SentinelPassword: sentinelPassword,
			Username: opts.Username, Password: opts.Password, DB: opts.DB, TLSConfig: opts.TLSConfig,
			DialTimeout: opts.DialTimeout, ReadTimeout: opts.ReadTimeout, WriteTimeout: opts.WriteTimeout, PoolSize: opts.PoolSize,
		}), nil
	}
	return redis.NewClient(opts), nil
}

func (c *Config) redisOptions() (*redis.Options, []*problem) {
	r := &c.Redis
	u, msg := parseURL(r.URL)
	if msg != "" {
		return nil, []*problem{problemf("redis.url", "%s", msg)}
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix" {
		return nil, []*problem{problemf("redis.url", "must start with redis://, rediss:// or unix://, got scheme %q", u.Scheme)}
	}
	opts, err := redis.ParseURL(r.URL)
	if err != nil {
		// url.Parse succeeded, so go-redis's errors are about the path,
		// the database or the query, never the credentials.
		return nil, []*problem{problemf("redis.url", "%s", strings.TrimPrefix(err.Error(), "redis: "))}
	}
	var ps []*problem
	if r.PasswordFile != "" {
		if opts.Password != "" {
			ps = append(ps, problemf("redis.password_file", "redis.url has a password too; give one of them"))
		} else if pw, p := readSecretFile("redis.password_file", r.PasswordFile); p != nil {
			ps = append(ps, p)
		} else {
			opts.Password = pw
		}
	}
	ps = append(ps, r.topologyProblems(opts.DB)...)
	ps = append(ps, r.replicationProblems()...)
	if r.TLS.isSet() {
		if opts.TLSConfig == nil {
			ps = append(ps, problemf("redis.tls", "set, but redis.url does not start with rediss://"))
		} else {
			ps = append(ps, r.TLS.apply("redis.tls", opts.TLSConfig)...)
		}
	}
	return opts, ps
}

// topologyProblems checks redis.cluster_addrs and redis.sentinel.
func (r *Redis) topologyProblems(db int) []*problem {
	var ps []*problem
	for i, a := range r.ClusterAddrs {
		if msg := checkHostPort(a); msg != "" {
			ps = append(ps, problemf(fmt.Sprintf("redis.cluster_addrs[%d]", i), "%s", msg))
		}
	}
	if len(r.ClusterAddrs) > 0 && db != 0 {
		ps = append(ps, problemf("redis.url", "a Redis Cluster has only database 0, got %d", db))
	}
	s := &r.Sentinel
	if s.MasterName == "" {
		if len(s.Addrs) > 0 || s.PasswordFile != "" {
			ps = append(ps, problemf("redis.sentinel.master_name", "required with redis.sentinel.addrs"))
		}
		return ps
	}
	if len(r.ClusterAddrs) > 0 {
		ps = append(ps, problemf("redis.sentinel", "give redis.sentinel or redis.cluster_addrs, not both"))
	}
	if len(s.Addrs) == 0 {
		ps = append(ps, problemf("redis.sentinel.addrs", "at least one sentinel (host:port) is required with redis.sentinel.master_name"))
	}
	for i, a := range s.Addrs {
		if msg := checkHostPort(a); msg != "" {
			ps = append(ps, problemf(fmt.Sprintf("redis.sentinel.addrs[%d]", i), "%s", msg))
		}
	}
	// Read here, as the other password files are, so that a missing or
	// empty one stops start-up by its key; RedisClient reads it again.
	if s.PasswordFile != "" {
		if _, p := readSecretFile("redis.sentinel.password_file", s.PasswordFile); p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// replicationProblems checks redis.min_replicas_acked and
// redis.min_replicas_timeout.
func (r *Redis) replicationProblems() []*problem {
	var ps []*problem
	if n := r.MinReplicasAcked; n < 0 || n > MaxMinReplicasAcked {
		ps = append(ps, problemf("redis.min_replicas_acked", "must be from 0 (off) to %d replicas, got %d", MaxMinReplicasAcked, n))
	}
	if d := r.MinReplicasTimeout; d < 0 || d > MaxMinReplicasTimeout {
		ps = append(ps, problemf("redis.min_replicas_timeout", "must be from 0 (the default, %s) to %s, got %s", DefaultMinReplicasTimeout, MaxMinReplicasTimeout, d))
	} else if d > 0 && d < time.Millisecond {
		ps = append(ps, problemf("redis.min_replicas_timeout", "must be at least 1ms (Redis WAIT counts milliseconds), got %s", d))
	}
	return ps
}

// checkHostPort checks a host:port to connect to.
func checkHostPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return fmt.Sprintf("must be host:port, got %q", addr)
	}
	return ""
}
