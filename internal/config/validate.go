package config

import (
	"net"
	"strconv"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// Validate reports every problem of the configuration in one error
// matching ErrInvalid, each line naming its key. Call SetDefaults first, as
// Load does. It reads the files the configuration names (password and
// token files, TLS material) to check them.
func (c *Config) Validate() error {
	var ps problems
	c.validate(&ps)
	return ps.err()
}

func (c *Config) validate(ps *problems) {
	c.validateQueue(ps)
	_, redisProblems := c.redisOptions()
	ps.addAll(redisProblems)
	_, natsProblems := c.natsOptions()
	ps.addAll(natsProblems)
	if c.Pacer.Rate == 0 && !c.producer {
		ps.addf("pacer.rate", "required: the provider's cap for the whole cluster, in requests per second")
	}
	if c.Pacer.Rate != 0 || !c.producer {
		pc := c.PacerConfig()
		pc.SetDefaults()
		ps.addChecked(pc.Validate(), pacer.ErrInvalidConfig, func(key string) bool {
			// A pacer name taken from queue.name is reported as queue.name.
			return key == "pacer.name" && c.Pacer.Name == c.Queue.Name
		})
	}
	if c.Sink.URL != "" || c.Sink.Type != SinkHTTP || !c.producer {
		c.validateSink(ps)
	}
	if l := c.Metrics.Listen; l != MetricsOff {
		if msg := checkListen(l); msg != "" {
			ps.addf("metrics.listen", "%s", msg)
		}
	}
	if d := c.Dispatch.ShutdownTimeout; d <= 0 {
		ps.addf("dispatch.shutdown_timeout", "must be positive, got %s", d)
	}
}

func (c *Config) validateQueue(ps *problems) {
	q := &c.Queue
	if q.Name == "" {
		ps.addf("queue.name", "required: the logical queue, from which Redis keys and NATS subjects derive")
	}
	if q.Backend != BackendRedis && q.Backend != BackendNATS {
		ps.addf("queue.backend", "must be redis or nats, got %q", q.Backend)
	}
	prio := c.PriorityConfig()
	prio.SetDefaults()
	ps.addChecked(prio.Validate(), priority.ErrInvalidConfig, nil)
	// queue.Config checks the lanes' names as priority.Config does; the
	// same problem, under the same key, is reported once.
	qc := c.QueueConfig()
	qc.SetDefaults()
	ps.addChecked(qc.Validate(), queue.ErrInvalidConfig, nil)
	b := q.Backoff
	switch {
	case b.Min <= 0:
		ps.addf("queue.backoff.min", "must be positive, got %s", b.Min)
	case b.Max < b.Min:
		ps.addf("queue.backoff.max", "must be at least queue.backoff.min (%s), got %s", formatDuration(b.Min), formatDuration(b.Max))
	}
}

func (c *Config) validateSink(ps *problems) {
	switch c.Sink.Type {
	case SinkLog:
	case SinkHTTP:
		// Checked here first, so that a malformed URL is reported without
		// any part of it: it may hold credentials.
		if c.Sink.URL != "" {
			if _, msg := parseURL(c.Sink.URL); msg != "" {
				ps.addf("sink.url", "%s", msg)
			}
		}
		hc := c.HTTPSinkConfig()
		hc.SetDefaults()
		ps.addChecked(hc.Validate(), sink.ErrInvalidConfig, nil)
	default:
		ps.addf("sink.type", "must be http or log, got %q", c.Sink.Type)
	}
}

// checkListen checks a host:port to listen on.
func checkListen(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "must be host:port (such as 127.0.0.1:9464 or :9464) or off, got " + strconv.Quote(addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "port must be a number from 0 to 65535, got " + strconv.Quote(port)
	}
	return ""
}
