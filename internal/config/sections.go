package config

import (
	"maps"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/dispatch"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// QueueConfig returns the queue backend's configuration: the queue: keys
// it owns and the lanes' names in order. Consumer is left zero, for its
// default.
func (c *Config) QueueConfig() queue.Config {
	qc := c.Queue.Config
	qc.Lanes = c.Queue.Priority.LaneNames()
	return qc
}

// PriorityConfig returns the lanes, the policy and the privileged users.
func (c *Config) PriorityConfig() priority.Config {
	p := c.Queue.Priority
	p.Lanes = slices.Clone(p.Lanes)
	p.PrivilegedUsers = slices.Clone(p.PrivilegedUsers)
	return p
}

// PacerConfig returns the pacer's configuration; its name is queue.name
// when pacer.name is not set.
func (c *Config) PacerConfig() pacer.Config { return c.Pacer }

// HTTPSinkConfig returns the HTTP sink's configuration. It is meaningful
// when Sink.Type is SinkHTTP.
func (c *Config) HTTPSinkConfig() sink.HTTPConfig {
	hc := c.Sink.HTTPConfig
	hc.Headers = maps.Clone(hc.Headers)
	return hc
}

// DispatchConfig returns the engine's configuration: the dispatch: keys,
// and the keys of other sections that the engine keeps to. sink.max_in_flight
// belongs to the sink, which bounds its connections with it; the engine
// bounds the requests it has in flight with the same number, so that none
// waits for a connection. queue.backoff is the engine's retry backoff,
// written under queue: because it is about the queue's jobs. pacer.rate
// sizes the engine's fetching and queue.visibility_timeout when it extends
// a job's.
func (c *Config) DispatchConfig() dispatch.Config {
	d := c.Dispatch
	d.MaxInFlight = c.Sink.MaxInFlight
	d.BackoffMin, d.BackoffMax = c.Queue.Backoff.Min, c.Queue.Backoff.Max
	d.RateHint = c.Pacer.Rate
	d.VisibilityTimeout = c.Queue.VisibilityTimeout
	return d
}

// Backoff returns the bounds of the delay before a job that failed for now
// is tried again.
func (c *Config) Backoff() (minDelay, maxDelay time.Duration) {
	return c.Queue.Backoff.Min, c.Queue.Backoff.Max
}

// ShutdownTimeout returns how long a graceful shutdown may take.
func (c *Config) ShutdownTimeout() time.Duration { return c.Dispatch.ShutdownTimeout }

// MetricsAddr returns the address to serve /metrics, /healthz and /readyz
// on, and false when metrics.listen is off.
func (c *Config) MetricsAddr() (string, bool) {
	if c.Metrics.Listen == MetricsOff {
		return "", false
	}
	return c.Metrics.Listen, true
}
