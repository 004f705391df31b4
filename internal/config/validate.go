package config

import (
	"net"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/setting"
	"github.com/sluicehq/sluice/sink"
)

// MinVisibilityTimeout is the least queue.visibility_timeout a dispatcher
// starts with; see validateKeepAlive.
const MinVisibilityTimeout = 2 * time.Second

// Validate reports every problem of the configuration in one error
// matching ErrInvalid, each line naming its key. Call SetDefaults first, as
// Load does. It reads the files the configuration names (password and
// token files, TLS material) to check them, but those a configuration
// loaded by LoadProducer, LoadAdmin or LoadAPI does not use: the
// provider's secret and admin.token_file. A Config built by hand is
// checked as Load checks it.
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
	replica := c.mode == forReplica
	c.validateQueue(ps)
	_, redisProblems := c.redisOptions()
	ps.addAll(redisProblems)
	_, natsProblems := c.natsOptions()
	ps.addAll(natsProblems)
	if c.Pacer.Rate == 0 && replica {
		ps.addf("pacer.rate", "required: the provider's cap for the whole cluster, in requests per second")
	}
	if c.Pacer.Rate != 0 || replica {
		// A pacer name taken from queue.name is reported as queue.name.
		derived := c.Pacer.Name == c.Queue.Name
		ps.addChecked(c.Pacer.Validate(), func(p *problem) bool { return derived && p.Key == "pacer.name" })
	}
	switch {
	case replica:
		c.validateSink(ps)
	case c.Sink.URL != "" || c.Sink.Type != SinkHTTP:
		c.validateSinkShape(ps)
	}
	if l := c.Metrics.Listen; l != MetricsOff {
		if msg := checkListen(l); msg != "" {
			ps.addf("metrics.listen", "%s", msg)
		}
	}
	if replica {
		c.validateAdmin(ps)
	}
	// The engine checks queue.backoff and dispatch.*, and again
	// sink.max_in_flight and pacer.rate, which their owners checked first.
	d := c.DispatchConfig()
	ps.addChecked(d.Validate(), nil)
	// The ingest API's keys; its token file is read by serve-api alone.
	ps.addChecked(c.API.Validate(), nil)
	if c.mode == forAPI {
		if _, err := c.API.Token(); err != nil {
			ps.addChecked(err, nil)
		}
	}
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
	if c.mode == forReplica {
		c.validateKeepAlive(ps)
	}
}

// validateKeepAlive refuses a visibility timeout that the dispatcher's
// keep-alive cannot cover. A replica extends every job it holds, waiting
// for a slot or with its request open to the provider, at least every half
// visibility timeout (internal/dispatch, keepAlive), so a request may
// outlast the visibility timeout: sink.timeout is not bounded by it, on
// either backend (Redis claims the entry again for the same consumer,
// resetting its idle time; JetStream restarts the ack wait on an
// in-progress ack). What keep-alive cannot cover is a stall of the replica
// or of the backend longer than the slack it leaves: half the visibility
// timeout, less a tenth on JetStream, where a delivery counts as lost at
// 90% of it. Below MinVisibilityTimeout that slack is under a second, which
// a loaded host or a slow backend can take, and jobs would then reach the
// provider twice. The producer, which holds no job, is not checked.
func (c *Config) validateKeepAlive(ps *problems) {
	if v := c.Queue.VisibilityTimeout; v > 0 && v < MinVisibilityTimeout {
		ps.addf("queue.visibility_timeout", "must be at least %s for the dispatcher, got %s: jobs held or in flight are extended every third of it, and a shorter one leaves under a second for a stalled replica or backend before a job is sent twice",
			MinVisibilityTimeout, v)
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
		ps.addChecked(c.Sink.HTTPConfig.Validate(), nil)
	default:
		ps.addf("sink.type", "must be http or log, got %q", c.Sink.Type)
	}
}

// validateSinkShape checks, for a process that sends nothing to the
// provider, the sink's keys that shape a job's request (those
// sink.NewBounds reads: url, method, encoding, content_type,
// allowed_hosts, headers), with which a producer refuses a job the
// dispatchers would not send. It reads no secret.
func (c *Config) validateSinkShape(ps *problems) {
	switch c.Sink.Type {
	case SinkLog:
		return
	case SinkHTTP:
	default:
		ps.addf("sink.type", "must be http or log, got %q", c.Sink.Type)
		return
	}
	// As in validateSink, a malformed URL is reported without any part of
	// it.
	if _, msg := parseURL(c.Sink.URL); msg != "" {
		ps.addf("sink.url", "%s", msg)
		return
	}
	_, err := sink.NewBounds(c.HTTPSinkConfig())
	if err != nil && len(setting.Errors(err)) == 0 {
		ps.addf("sink.url", "%v", err)
		return
	}
	ps.addChecked(err, nil)
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
