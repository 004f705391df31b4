package config

import (
	"slices"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// QueueConfig returns the queue backend's configuration: queue.name, the
// lanes' names in order, and the queue's timings and limits. Consumer and
// Now are left zero, for their defaults.
func (c *Config) QueueConfig() queue.Config {
	names := make([]string, len(c.Queue.Lanes))
	for i, l := range c.Queue.Lanes {
		names[i] = l.Name
	}
	return queue.Config{
		Name:              c.Queue.Name,
		Lanes:             names,
		VisibilityTimeout: c.Queue.VisibilityTimeout,
		MaxAttempts:       c.Queue.MaxAttempts,
		DedupWindow:       c.Queue.DedupWindow,
		MaxPayloadBytes:   c.Queue.MaxPayloadBytes,
	}
}

// PriorityConfig returns the lanes, the policy and the privileged users.
func (c *Config) PriorityConfig() priority.Config {
	return priority.Config{
		Lanes:           slices.Clone(c.Queue.Lanes),
		Policy:          c.Queue.Policy,
		PrivilegedUsers: slices.Clone(c.Queue.PrivilegedUsers),
	}
}

// PacerConfig returns the pacer's configuration; its name is queue.name
// when pacer.name is not set.
func (c *Config) PacerConfig() pacer.Config {
	return pacer.Config{
		Name:        or(c.Pacer.Name, c.Queue.Name),
		Rate:        c.Pacer.Rate,
		Burst:       c.Pacer.Burst,
		Horizon:     c.Pacer.Horizon,
		MaxBatch:    c.Pacer.MaxBatch,
		MaxLateness: c.Pacer.MaxLateness,
		Headroom:    c.Pacer.Headroom,
	}
}

// HTTPSinkConfig returns the HTTP sink's configuration, headers revealed.
// It is meaningful when Sink.Type is SinkHTTP.
func (c *Config) HTTPSinkConfig() sink.HTTPConfig {
	var headers map[string]string
	if len(c.Sink.Headers) > 0 {
		headers = make(map[string]string, len(c.Sink.Headers))
		for name, v := range c.Sink.Headers {
			headers[name] = v.Reveal()
		}
	}
	return sink.HTTPConfig{
		URL:         c.Sink.URL,
		Timeout:     c.Sink.Timeout,
		MaxInFlight: c.Sink.MaxInFlight,
		Headers:     headers,
	}
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
