package config

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

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
func (c *Config) RedisClient() (redis.UniversalClient, error) {
	opts, err := c.RedisOptions()
	if err != nil {
		return nil, err
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
	if r.TLS.isSet() {
		if opts.TLSConfig == nil {
			ps = append(ps, problemf("redis.tls", "set, but redis.url does not start with rediss://"))
		} else {
			ps = append(ps, r.TLS.apply("redis.tls", opts.TLSConfig)...)
		}
	}
	return opts, ps
}

// joinProblems returns problems as one error matching ErrInvalid.
func joinProblems(list []*problem) error {
	var ps problems
	ps.addAll(list)
	return ps.err()
}
