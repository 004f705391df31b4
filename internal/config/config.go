package config

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/internal/api"
	"github.com/sluicehq/sluice/internal/dispatch"
	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// ErrInvalid is matched by every error of Load and Validate about the
// configuration's content: unknown keys, values of the wrong type and
// impossible values. The error also matches the sentinels of the packages
// whose checks failed (pacer.ErrInvalidConfig, ...), and errors.As finds
// each problem as a *setting.Error.
var ErrInvalid = errors.New("config: invalid configuration")

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "SLUICE_"

// EnvConfigFile is the one SLUICE_ variable that names no key: the binaries
// read the configuration file's path from it. Load ignores it.
const EnvConfigFile = "SLUICE_CONFIG"

// Defaults of this package's own keys. The other keys' defaults are the
// configured packages' (queue.DefaultVisibilityTimeout, ...), applied by
// their SetDefaults.
const (
	DefaultBackend       = BackendRedis
	DefaultLane          = "default"
	DefaultRedisURL      = "redis://127.0.0.1:6379/0"
	DefaultNATSURL       = "nats://127.0.0.1:4222"
	DefaultSinkType      = SinkHTTP
	DefaultMetricsListen = "127.0.0.1:9464"
	// MetricsOff as metrics.listen turns the metrics listener off.
	MetricsOff = "off"
)

// Config is the whole configuration file. Each section is, or embeds, the
// configuration of the package it configures: the YAML keys are those
// structs' yaml tags. Load fills it; every field's zero value means its
// documented default, which SetDefaults fills in. Printing a Config
// (String) shows it with its secrets hidden.
type Config struct {
	Queue    Queue           `yaml:"queue"`
	Redis    Redis           `yaml:"redis"`
	NATS     NATS            `yaml:"nats"`
	Pacer    pacer.Config    `yaml:"pacer"`
	Sink     Sink            `yaml:"sink"`
	Metrics  Metrics         `yaml:"metrics"`
	Admin    Admin           `yaml:"admin"`
	Dispatch dispatch.Config `yaml:"dispatch"`
	API      api.Config      `yaml:"api"`

	// mode is what the configuration was loaded for; zero is a replica.
	mode mode
}

// mode is what a configuration is loaded for, which says the keys it must
// have and the files Validate reads.
type mode int

const (
	// forReplica (Load) needs every key a replica uses and reads every
	// file the configuration names.
	forReplica mode = iota
	// forClient (LoadProducer, LoadAdmin) is a process that sends nothing
	// to the provider and serves no console: pacer.rate and sink.url are
	// optional, and of the sink only what shapes a job's request is
	// checked (sink.NewBounds); the provider's secret (sink.auth) and the
	// console's token (admin.token_file) are not read.
	forClient
	// forAPI (LoadAPI) is forClient for serve-api, which also reads its
	// own token (api.token_file).
	forAPI
)

// Backend names the durable queue's store.
type Backend string

// The backends.
const (
	BackendRedis Backend = "redis" // Redis Streams, at redis.url
	BackendNATS  Backend = "nats"  // NATS JetStream, at nats.url
)

// Queue is the queue: section: the queue's own keys (queue.Config: name,
// visibility_timeout, max_attempts, dedup_window, max_payload_bytes), the
// lanes (priority.Config: lanes, policy, privileged_users), the backend,
// and the engine's retry backoff.
type Queue struct {
	// Config holds the queue's keys. Its Lanes are not a key: SetDefaults
	// copies the lanes' names from Priority.
	queue.Config `yaml:",squash"`
	// Backend is redis or nats. Zero means redis. The pacer always keeps
	// its schedule in Redis, whatever the backend.
	Backend Backend `yaml:"backend"`
	// Priority holds the keys lanes, policy and privileged_users. Zero
	// lanes means one lane, "default".
	Priority priority.Config `yaml:",squash"`
	// Backoff bounds the delay before a job that failed for now is tried
	// again; the engine (dispatch.Config) owns its defaults and checks.
	Backoff Backoff `yaml:"backoff"`
}

// Backoff bounds the exponential backoff (with jitter) between attempts:
// dispatch.Config's BackoffMin and BackoffMax.
type Backoff struct {
	// Min is the delay after the first failure. Zero means 1s.
	Min time.Duration `yaml:"min"`
	// Max caps the delay; at least Min. Zero means 5m.
	Max time.Duration `yaml:"max"`
}

// SinkType names the sink.
type SinkType string

// The sinks.
const (
	SinkHTTP SinkType = "http" // POST each job to sink.url
	SinkLog  SinkType = "log"  // log each job and call it delivered
)

// Sink is the sink: section: the sink's type and the HTTP sink's keys
// (sink.HTTPConfig: url, timeout, max_in_flight, headers). The HTTP sink
// owns sink.max_in_flight, its bound on requests in flight; the engine
// keeps to the same bound, whatever the sink (see DispatchConfig).
type Sink struct {
	// Type is http or log. Zero means http.
	Type SinkType `yaml:"type"`
	// HTTPConfig holds the HTTP sink's keys. Its URL's password and query
	// and its headers' values are hidden from Redacted.
	sink.HTTPConfig `yaml:",squash"`
}

// Metrics is the metrics: section.
type Metrics struct {
	// Listen is the host:port of /metrics, /healthz and /readyz, or "off"
	// for no listener. Zero means 127.0.0.1:9464.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on
	// the same listener, for finding where a replica's CPU or memory goes.
	// Off by default: a profile exposes the process's internals, so turn it
	// on only where the listener is not reachable from outside.
	Pprof bool `yaml:"pprof"`
}

// SetDefaults fills the zero fields with their defaults, as Load does:
// each package's SetDefaults, once, after the few defaults that join the
// sections (pacer.name is queue.name, one lane "default").
func (c *Config) SetDefaults() {
	q := &c.Queue
	q.Backend = or(q.Backend, DefaultBackend)
	if len(q.Priority.Lanes) == 0 {
		q.Priority.Lanes = []priority.Lane{{Name: DefaultLane}}
	}
	q.Priority.SetDefaults()
	q.Config.SetDefaults()
	q.Config.Lanes = q.Priority.LaneNames()
	c.Redis.URL = or(c.Redis.URL, DefaultRedisURL)
	c.NATS.URL = or(c.NATS.URL, DefaultNATSURL)
	c.NATS.Replicas = or(c.NATS.Replicas, DefaultNATSReplicas)
	c.Redis.MinReplicasTimeout = or(c.Redis.MinReplicasTimeout, DefaultMinReplicasTimeout)
	c.Pacer.Name = or(c.Pacer.Name, q.Name)
	c.Pacer.SetDefaults()
	c.Sink.Type = or(c.Sink.Type, DefaultSinkType)
	c.Sink.HTTPConfig.SetDefaults()
	c.Metrics.Listen = or(c.Metrics.Listen, DefaultMetricsListen)
	c.Dispatch = c.DispatchConfig()
	c.Dispatch.SetDefaults()
	q.Backoff = Backoff{Min: c.Dispatch.BackoffMin, Max: c.Dispatch.BackoffMax}
	c.API.SetDefaults()
}

// or returns v, or def when v is zero.
func or[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// String is Redacted: the effective configuration with its secrets hidden.
func (c *Config) String() string { return c.Redacted() }

// LogValue logs the configuration as Redacted does, secrets hidden.
func (c *Config) LogValue() slog.Value { return slog.StringValue(c.Redacted()) }

// Secret is a string that does not show itself: printed, logged or
// marshalled it is "***" (or "" when empty). Reveal returns the value.
type Secret string

// Hidden is what a secret shows instead of itself.
const Hidden = "***"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns "***", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Hidden
}

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// LogValue hides the secret from log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText hides the secret from encoding/json and YAML encoders.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
