package config

import (
	"net"
	"strconv"
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

// validate adds the problems each package's Validate finds, and this
// package's own (the backend, the clients, which keys are required), in
// the order of the file's sections.
func (c *Config) validate(ps *problems) {
	from := len(ps.list)
	c.validateQueue(ps)
	_, redisProblems := c.redisOptions()
	ps.addAll(redisProblems)
	_, natsProblems := c.natsOptions()
	ps.addAll(natsProblems)
	if c.Pacer.Rate == 0 && !c.producer {
		ps.addf("pacer.rate", "required: the provider's cap for the whole cluster, in requests per second")
	}
	if c.Pacer.Rate != 0 || !c.producer {
		// A pacer name taken from queue.name is reported as queue.name.
		derived := c.Pacer.Name == c.Queue.Name
		ps.addChecked(c.Pacer.Validate(), func(p *problem) bool { return derived && p.Key == "pacer.name" })
	}
	if c.Sink.URL != "" || c.Sink.Type != SinkHTTP || !c.producer {
		c.validateSink(ps)
	}
	if l := c.Metrics.Listen; l != MetricsOff {
		if msg := checkListen(l); msg != "" {
			ps.addf("metrics.listen", "%s", msg)
		}
	}
	// The engine checks queue.backoff and dispatch.*, and again
	// sink.max_in_flight and pacer.rate, which their owners checked first.
	d := c.DispatchConfig()
	ps.addChecked(d.Validate(), nil)
	ps.sortBySection(from)
}

func (c *Config) validateQueue(ps *problems) {
	q := &c.Queue
	if q.Name == "" {
		ps.addf("queue.name", "required: the logical queue, from which Redis keys and NATS subjects derive")
	}
	if q.Backend != BackendRedis && q.Backend != BackendNATS {
		ps.addf("queue.backend", "must be redis or nats, got %q", q.Backend)
	}
	ps.addChecked(q.Priority.Validate(), nil)
	// queue.Config checks the lanes' names as priority.Config does; the
	// same problem, under the same key, is reported once.
	qc := c.QueueConfig()
	ps.addChecked(qc.Validate(), nil)
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
		ps.addChecked(c.Sink.HTTPConfig.Validate(), nil)
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
