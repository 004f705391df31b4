package config

import (
	"errors"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

// ErrInvalid is matched by every error of Load and Validate about the
// configuration's content: unknown keys, values of the wrong type and
// impossible values. The error also matches the sentinels of the packages
// whose checks failed (pacer.ErrInvalidConfig, ...).
var ErrInvalid = errors.New("config: invalid configuration")

// EnvPrefix starts every environment variable Load reads.
const EnvPrefix = "SLUICE_"

// EnvConfigFile is the one SLUICE_ variable that names no key: the binaries
// read the configuration file's path from it. Load ignores it.
const EnvConfigFile = "SLUICE_CONFIG"

// Defaults of this package's own keys. The other keys' defaults are the
// configured packages' (queue.DefaultVisibilityTimeout, ...).
const (
	DefaultBackend         = BackendRedis
	DefaultLane            = "default"
	DefaultBackoffMin      = time.Second
	DefaultBackoffMax      = 5 * time.Minute
	DefaultRedisURL        = "redis://127.0.0.1:6379/0"
	DefaultNATSURL         = "nats://127.0.0.1:4222"
	DefaultSinkType        = SinkHTTP
	DefaultMetricsListen   = "127.0.0.1:9464"
	DefaultShutdownTimeout = 10 * time.Second
	// MetricsOff as metrics.listen turns the metrics listener off.
	MetricsOff = "off"
)

// Config is the whole configuration file. Load fills it; every field's zero
// value means its documented default, which SetDefaults fills in. Printing
// a Config (String) shows it with its secrets hidden.
type Config struct {
	Queue    Queue    `yaml:"queue"`
	Redis    Redis    `yaml:"redis"`
	NATS     NATS     `yaml:"nats"`
	Pacer    Pacer    `yaml:"pacer"`
	Sink     Sink     `yaml:"sink"`
	Metrics  Metrics  `yaml:"metrics"`
	Dispatch Dispatch `yaml:"dispatch"`

	producer bool // loaded by LoadProducer: the dispatcher's keys are optional
}

// Backend names the durable queue's store.
type Backend string

// The backends.
const (
	BackendRedis Backend = "redis" // Redis Streams, at redis.url
	BackendNATS  Backend = "nats"  // NATS JetStream, at nats.url
)

// Queue is the queue: section: the queue itself and its lanes.
type Queue struct {
	// Name is the logical queue; Redis keys and NATS subjects derive from
	// it. Required: 1-64 letters, digits, '_' or '-'.
	Name string `yaml:"name"`
	// Backend is redis or nats. Zero means redis. The pacer always keeps
	// its schedule in Redis, whatever the backend.
	Backend Backend `yaml:"backend"`
	// Lanes are the priority lanes, highest priority first. Zero means one
	// lane, "default".
	Lanes []priority.Lane `yaml:"lanes"`
	// Policy is strict or weighted. Zero means strict.
	Policy priority.Policy `yaml:"policy"`
	// PrivilegedUsers are the users whose jobs go to the first lane unless
	// the job names one. Optional.
	PrivilegedUsers []string `yaml:"privileged_users"`
	// VisibilityTimeout: see queue.Config. Zero means 30s.
	VisibilityTimeout time.Duration `yaml:"visibility_timeout"`
	// MaxAttempts: see queue.Config. Zero means 8.
	MaxAttempts int `yaml:"max_attempts"`
	// DedupWindow: see queue.Config. Zero means 10m.
	DedupWindow time.Duration `yaml:"dedup_window"`
	// MaxPayloadBytes: see queue.Config. Zero means 64 KiB.
	MaxPayloadBytes int `yaml:"max_payload_bytes"`
	// Backoff bounds the delay before a job that failed for now is tried
	// again.
	Backoff Backoff `yaml:"backoff"`
}

// Backoff bounds the exponential backoff (with jitter) between attempts.
type Backoff struct {
	// Min is the delay after the first failure. Zero means 1s.
	Min time.Duration `yaml:"min"`
	// Max caps the delay; at least Min. Zero means 5m.
	Max time.Duration `yaml:"max"`
}

// Redis is the redis: section: the pacer's store, and the queue's when the
// backend is redis.
type Redis struct {
	// URL is redis://[user:password@]host:port/db, rediss://... for TLS,
	// or unix:///path/to/socket; go-redis's URL options (dial_timeout=...)
	// are accepted as query parameters. Zero means
	// redis://127.0.0.1:6379/0.
	URL string `yaml:"url" redact:"url"`
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
}

// Sentinel configures Redis Sentinel.
type Sentinel struct {
	// MasterName is the name the sentinels monitor the master under.
	// Setting it turns Sentinel on.
	MasterName string `yaml:"master_name"`
	// Addrs are the sentinels (host:port). Required with master_name.
	Addrs []string `yaml:"addrs"`
	// PasswordFile names a file holding the sentinels' own password, if
	// they have one. Optional.
	PasswordFile string `yaml:"password_file"`
}

// TLS is a client's TLS material. The zero value uses the system's roots
// and presents no client certificate.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities to trust instead
	// of the system's. Optional.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS. Optional; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// NATS is the nats: section: the queue's store when the backend is nats.
// At most one way to authenticate: user and password (in the URL or as
// keys), a token, or a credentials file.
type NATS struct {
	// URL is nats://host:port (tls://, ws://, wss:// too), or several
	// separated by commas. Zero means nats://127.0.0.1:4222.
	URL string `yaml:"url" redact:"url"`
	// User and Password authenticate with a user name and password; the
	// password may come from PasswordFile instead. Optional.
	User         string `yaml:"user"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// Token authenticates with a token, or TokenFile names a file holding
	// it. Optional.
	Token     Secret `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	// CredsFile is a NATS credentials file (user JWT and NKey seed).
	// Optional.
	CredsFile string `yaml:"creds_file"`
	// TLS configures TLS; setting any of it requires TLS of the server.
	TLS TLS `yaml:"tls"`
}

// Pacer is the pacer: section; see pacer.Config.
type Pacer struct {
	// Name names the schedule in Redis. Zero means queue.name.
	Name string `yaml:"name"`
	// Rate is the provider's cap for the whole cluster, in requests per
	// second. Required.
	Rate float64 `yaml:"rate"`
	// Burst: zero means 1. Horizon: zero means 50ms. MaxBatch: zero means
	// 64. MaxLateness: zero means 2ms. Headroom: zero means MaxLateness per
	// 100ms, negative means none.
	Burst       int           `yaml:"burst"`
	Horizon     time.Duration `yaml:"horizon"`
	MaxBatch    int           `yaml:"max_batch"`
	MaxLateness time.Duration `yaml:"max_lateness"`
	Headroom    float64       `yaml:"headroom"`
}

// SinkType names the sink.
type SinkType string

// The sinks.
const (
	SinkHTTP SinkType = "http" // POST each job to sink.url
	SinkLog  SinkType = "log"  // log each job and call it delivered
)

// Sink is the sink: section; see sink.HTTPConfig.
type Sink struct {
	// Type is http or log. Zero means http.
	Type SinkType `yaml:"type"`
	// URL is where jobs are POSTed. Required when Type is http. Its
	// password and query are hidden from Redacted.
	URL string `yaml:"url" redact:"url,query"`
	// Timeout bounds one request. Zero means 5s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight bounds the requests in flight. Zero means 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// Headers are sent with every request (an API key, say). Optional.
	Headers map[string]Secret `yaml:"headers"`
}

// Metrics is the metrics: section.
type Metrics struct {
	// Listen is the host:port of /metrics, /healthz and /readyz, or "off"
	// for no listener. Zero means 127.0.0.1:9464.
	Listen string `yaml:"listen"`
}

// Dispatch is the dispatch: section.
type Dispatch struct {
	// ShutdownTimeout bounds a graceful shutdown: how long in-flight jobs
	// get to finish. Zero means 10s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
}

// SetDefaults fills the zero fields with their defaults, as Load does.
func (c *Config) SetDefaults() {
	q := &c.Queue
	q.Backend = or(q.Backend, DefaultBackend)
	if len(q.Lanes) == 0 {
		q.Lanes = []priority.Lane{{Name: DefaultLane}}
	}
	q.Policy = or(q.Policy, priority.Strict)
	for i := range q.Lanes {
		q.Lanes[i].Weight = or(q.Lanes[i].Weight, 1)
	}
	q.VisibilityTimeout = or(q.VisibilityTimeout, queue.DefaultVisibilityTimeout)
	q.MaxAttempts = or(q.MaxAttempts, queue.DefaultMaxAttempts)
	q.DedupWindow = or(q.DedupWindow, queue.DefaultDedupWindow)
	q.MaxPayloadBytes = or(q.MaxPayloadBytes, queue.DefaultMaxPayloadBytes)
	q.Backoff.Min = or(q.Backoff.Min, DefaultBackoffMin)
	q.Backoff.Max = or(q.Backoff.Max, DefaultBackoffMax)
	c.Redis.URL = or(c.Redis.URL, DefaultRedisURL)
	c.NATS.URL = or(c.NATS.URL, DefaultNATSURL)
	p := &c.Pacer
	p.Name = or(p.Name, q.Name)
	p.Burst = or(p.Burst, 1)
	p.Horizon = or(p.Horizon, pacer.DefaultHorizon)
	p.MaxBatch = or(p.MaxBatch, pacer.DefaultMaxBatch)
	p.MaxLateness = or(p.MaxLateness, pacer.DefaultMaxLateness)
	c.Sink.Type = or(c.Sink.Type, DefaultSinkType)
	c.Sink.Timeout = or(c.Sink.Timeout, sink.DefaultTimeout)
	c.Sink.MaxInFlight = or(c.Sink.MaxInFlight, sink.DefaultMaxInFlight)
	c.Metrics.Listen = or(c.Metrics.Listen, DefaultMetricsListen)
	c.Dispatch.ShutdownTimeout = or(c.Dispatch.ShutdownTimeout, DefaultShutdownTimeout)
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
