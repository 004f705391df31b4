package mockprovider

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors of the package, wrapped by the errors it returns.
var (
	// ErrInvalidConfig is wrapped by every problem Config.Validate reports.
	ErrInvalidConfig = errors.New("mockprovider: invalid config")
	// ErrNotServing is returned by Close when the provider was not started.
	ErrNotServing = errors.New("mockprovider: not serving")
	// ErrAlreadyServing is returned by Start when the provider already runs.
	ErrAlreadyServing = errors.New("mockprovider: already serving")
	// ErrNoArrivals is returned when a chart is asked of no arrivals.
	ErrNoArrivals = errors.New("mockprovider: no arrivals")
)

// Defaults applied by SetDefaults.
const (
	DefaultListen      = "127.0.0.1:8080"
	DefaultPath        = "/send"
	DefaultRetryAfter  = time.Second
	DefaultMaxArrivals = 1_000_000
)

// reservedPaths are served by the provider itself and cannot be Config.Path.
var reservedPaths = []string{"/report", "/arrivals", "/reset", "/healthz", "/capacity"}

// Config configures a Provider. Each field's key in Validate's errors is the
// name of the cmd/mockprovider flag that sets it. Zero values mean the
// documented default.
type Config struct {
	// Listen is the host:port Start listens on. Zero means 127.0.0.1:8080;
	// port 0 picks a free port (read it back with Provider.Addr). The host
	// must be a loopback address or "localhost" unless AllowRemote is set.
	Listen string
	// AllowRemote lets Listen name a non-loopback host (or none, which
	// means every interface).
	AllowRemote bool
	// Path is the URL path the provider accepts jobs on (POST). Zero means
	// "/send". It cannot be one of the control paths /report, /arrivals,
	// /reset or /healthz.
	Path string
	// Latency is added to every answer, as a provider's processing time.
	// Zero means none.
	Latency time.Duration
	// ThrottleShare is the share of requests (0..1) answered 429 Too Many
	// Requests with a Retry-After header. Zero means none.
	ThrottleShare float64
	// ErrorShare is the share of requests (0..1) answered 500. Zero means none.
	ErrorShare float64
	// RejectShare is the share of requests (0..1) answered 400 with a JSON
	// error body. Zero means none. The three shares add up to at most 1.
	RejectShare float64
	// RetryAfter is the Retry-After sent with a 429, rounded up to whole
	// seconds. Zero means 1s.
	RetryAfter time.Duration
	// Capacity is the provider's own limit, in requests per second: of the
	// requests it would accept, it accepts at most Capacity in any sliding
	// second and answers the others 429 with Retry-After: 1. Zero means no
	// limit. SetCapacity (or POST /capacity?rps=N) changes it while it runs.
	Capacity float64
	// Seed seeds the random choice of answers: the same seed and the same
	// sequence of requests give the same answers. Zero is a valid seed.
	Seed int64
	// Cap is the rate cap (requests per second) the dispatcher is configured
	// with. It only feeds the report's mean/cap and the chart's cap line.
	// Zero means unknown: neither is shown.
	Cap float64
	// MaxArrivals bounds how many arrivals are kept (each costs roughly
	// 200 bytes plus its ids); past it the oldest are forgotten and counted
	// as dropped. It bounds the delivered jobs remembered for Counts too.
	// Zero means 1,000,000.
	MaxArrivals int
	// KeepBodies keeps each request's body in its Arrival. Zero means only
	// the body's size is kept.
	KeepBodies bool
}

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.MaxArrivals == 0 {
		c.MaxArrivals = DefaultMaxArrivals
	}
}

// Validate reports every problem of the configuration, each naming its key
// (the flag of cmd/mockprovider) and wrapping ErrInvalidConfig. Call
// SetDefaults first.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...)))
	}
	if err := checkListen(c.Listen, c.AllowRemote); err != nil {
		bad("listen", "%v", err)
	}
	if !strings.HasPrefix(c.Path, "/") {
		bad("path", "%q must start with '/'", c.Path)
	}
	for _, r := range reservedPaths {
		if c.Path == r {
			bad("path", "%q is reserved for the provider's control endpoints", c.Path)
		}
	}
	if c.Latency < 0 {
		bad("latency", "must not be negative, got %s", c.Latency)
	}
	shares := []struct {
		key string
		v   float64
	}{{"throttle-share", c.ThrottleShare}, {"error-share", c.ErrorShare}, {"reject-share", c.RejectShare}}
	sum := 0.0
	for _, s := range shares {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			bad(s.key, "must be between 0 and 1, got %v", s.v)
		}
		sum += s.v
	}
	if sum > 1+1e-9 {
		bad("throttle-share", "throttle-share + error-share + reject-share must be at most 1, got %v", sum)
	}
	if c.RetryAfter < 0 {
		bad("retry-after", "must not be negative, got %s", c.RetryAfter)
	}
	if math.IsNaN(c.Cap) || math.IsInf(c.Cap, 0) || c.Cap < 0 {
		bad("cap", "must be a rate of at least 0 requests per second, got %v", c.Cap)
	}
	if math.IsNaN(c.Capacity) || math.IsInf(c.Capacity, 0) || c.Capacity < 0 {
		bad("capacity", "must be a rate of at least 0 requests per second, got %v", c.Capacity)
	}
	if c.MaxArrivals < 0 {
		bad("max-arrivals", "must be at least 1, got %d", c.MaxArrivals)
	}
	return errors.Join(errs...)
}

// checkListen checks a host:port and refuses a non-loopback host unless
// remote is allowed.
func checkListen(addr string, remote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", addr)
	}
	if remote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q: host %q is not a loopback address; set allow-remote to listen on it", addr, host)
}

// retryAfterSeconds renders d as a Retry-After value: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
