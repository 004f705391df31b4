package sink

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/setting"
)

// HTTPConfig configures the HTTP sink (the keys under sink: in the YAML
// file). Zero values mean the documented default.
type HTTPConfig struct {
	// URL is where jobs are sent: an absolute http or https URL, the base
	// that a job's own request.path and request.query extend. Required.
	// Credentials in it (https://user:pass@host/) are sent as basic
	// authentication, unless Headers has an Authorization, and never appear
	// in errors or logs; prefer Auth. Its credentials and query go only to
	// its own host, never to an allowed host a job names. When it is https,
	// a job's request.url must be https too, whether it names URL's host or
	// an allowed one, so that the sink's credentials (URL's, Auth, Headers)
	// never travel in clear; a job may name an http URL's host with https.
	URL string `yaml:"url"`
	// Method is the HTTP method of a job that names none: GET, POST, PUT,
	// PATCH or DELETE. Zero means POST.
	Method string `yaml:"method"`
	// Encoding is how a job's payload becomes the request body: json (the
	// payload as is, application/json), form (the payload's top-level
	// fields, application/x-www-form-urlencoded) or raw (a string payload's
	// text, any other payload's JSON, with the job's request.content_type
	// or ContentType). Zero means json.
	Encoding Encoding `yaml:"encoding"`
	// ContentType is the Content-Type of a raw body when the job gives
	// none. Only with encoding raw. Zero means application/octet-stream.
	ContentType string `yaml:"content_type"`
	// AllowedHosts are the hosts besides URL's that a job's request.url may
	// name ("api.example.com", or "host:port" for one port only), with
	// https only when URL is https. Zero means none: every request goes to
	// URL's host.
	AllowedHosts []string `yaml:"allowed_hosts"`
	// Auth is the authentication sent with every request. Zero means none
	// (besides URL credentials and Headers).
	Auth Auth `yaml:"auth"`
	// Timeout bounds one request, from connecting to reading the answer.
	// Zero means 5s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight bounds the connections to the provider, and so the
	// requests in flight at once: a request beyond it waits for a
	// connection (within its Timeout). Idle connections are kept up to the
	// same number and reused. Zero means 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// MaxInFlightTotal bounds the requests open to the provider across
	// every replica, for providers that limit open connections as well as
	// rate: each request holds a permit kept in Redis (pacer.Permits),
	// leased so that a dead replica's permits come back. Zero means no
	// cluster-wide bound.
	MaxInFlightTotal int `yaml:"max_in_flight_total"`
	// Headers are extra headers sent with every request, such as an API
	// key. Optional. They cannot replace the headers the sink sets itself
	// (Content-Type, Idempotency-Key, X-Sluice-*). Their values never
	// appear in errors or logs.
	Headers Headers `yaml:"headers"`
	// Now is the clock used to turn a Retry-After date into a duration.
	// Zero means time.Now.
	Now func() time.Time `yaml:"-"`

	// rootCAs, when set, are the only roots HTTPS answers are checked
	// against (tests: a test server's certificate); nil means the system's.
	rootCAs *x509.CertPool
}

// Headers are extra request headers, name to value. The values are secrets
// (an API key, a bearer token): printed with fmt, logged with log/slog or
// marshalled to JSON, a Headers shows its names and "***" for each value.
// Index it to read a value.
type Headers map[string]string

// hiddenValue is what a header's value shows instead of itself.
const hiddenValue = "***"

// hidden returns h with every value hidden.
func (h Headers) hidden() map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for name := range h {
		out[name] = hiddenValue
	}
	return out
}

// String shows the names with their values hidden.
func (h Headers) String() string { return fmt.Sprint(h.hidden()) }

// GoString hides the values from %#v.
func (h Headers) GoString() string { return fmt.Sprintf("sink.Headers(%#v)", h.hidden()) }

// LogValue hides the values from log/slog.
func (h Headers) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(h))
	for _, name := range slices.Sorted(maps.Keys(h)) {
		attrs = append(attrs, slog.String(name, hiddenValue))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON hides the values from encoding/json.
func (h Headers) MarshalJSON() ([]byte, error) { return json.Marshal(h.hidden()) }

// Defaults applied by HTTPConfig.SetDefaults.
const (
	DefaultTimeout     = 5 * time.Second
	DefaultMaxInFlight = 256
)

// The headers the HTTP sink sets on every request.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderJobID          = "X-Sluice-Job-Id"
	HeaderLane           = "X-Sluice-Lane"
	HeaderAttempt        = "X-Sluice-Attempt"
	HeaderEnqueuedAt     = "X-Sluice-Enqueued-At"
)

// Encoding is how a payload becomes the request body.
type Encoding string

// The encodings.
const (
	EncodingJSON Encoding = "json" // the payload as is, application/json
	EncodingForm Encoding = "form" // top-level fields, application/x-www-form-urlencoded
	EncodingRaw  Encoding = "raw"  // a string's text or the JSON, with the job's content type
)

// DefaultRawContentType is the Content-Type of a raw body when neither the
// job nor the configuration gives one.
const DefaultRawContentType = "application/octet-stream"

// reservedHeaders cannot be set through HTTPConfig.Headers.
var reservedHeaders = []string{
	"Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection",
	HeaderIdempotencyKey, HeaderJobID, HeaderLane, HeaderAttempt, HeaderEnqueuedAt,
}

// SetDefaults fills the zero fields with their defaults.
func (c *HTTPConfig) SetDefaults() {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	if c.Encoding == "" {
		c.Encoding = EncodingJSON
	}
	if c.Encoding == EncodingRaw && c.ContentType == "" {
		c.ContentType = DefaultRawContentType
	}
}

// Validate reports every problem of the configuration, each a
// *setting.Error naming its key as in the YAML file ("sink.timeout: must be
// positive, got -1s") and wrapping ErrInvalidConfig, joined with
// errors.Join. Call SetDefaults first. No message shows the URL's
// credentials, a header's value or the auth secret. It reads the auth
// secret's file or variable to check that it is there.
func (c *HTTPConfig) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "sink."+key, format, args...))
	}
	errs = append(errs, c.validateTarget()...)
	errs = append(errs, c.Auth.validate(c)...)
	if c.Timeout <= 0 {
		bad("timeout", "must be positive, got %s", c.Timeout)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<16 {
		bad("max_in_flight", "must be between 1 and 65536, got %d", c.MaxInFlight)
	}
	if c.MaxInFlightTotal < 0 || c.MaxInFlightTotal > 1<<20 {
		bad("max_in_flight_total", "must be between 0 (no cluster-wide bound) and 1048576, got %d", c.MaxInFlightTotal)
	}
	errs = append(errs, c.validateHeaders()...)
	return errors.Join(errs...)
}

// validateShape checks the keys that say how a job becomes a request (what
// Bounds needs): the URL, the method, the encoding, the content type, the
// allowed hosts and the headers.
func (c *HTTPConfig) validateShape() []error {
	return append(c.validateTarget(), c.validateHeaders()...)
}

// validateTarget checks the URL, the method, the encoding, the content
// type and the allowed hosts.
func (c *HTTPConfig) validateTarget() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "sink."+key, format, args...))
	}
	if _, err := parseEndpoint(c.URL); err != nil {
		bad("url", "%v", err)
	}
	if c.Method != "" && !slices.Contains(methods, c.Method) {
		bad("method", "must be one of %s, got %q", strings.Join(methods, ", "), c.Method)
	}
	switch c.Encoding {
	case "", EncodingJSON, EncodingForm:
		if c.ContentType != "" {
			bad("content_type", "only with encoding raw (encoding %s sets its own)", c.Encoding)
		}
	case EncodingRaw:
		if queue.HasControl(c.ContentType) {
			bad("content_type", "must not contain CR, LF or NUL, nor DEL or another byte below 0x20 but tab")
		}
	default:
		bad("encoding", "must be json, form or raw, got %q", c.Encoding)
	}
	for i, h := range c.AllowedHosts {
		if msg := checkAllowedHost(h); msg != "" {
			bad(fmt.Sprintf("allowed_hosts[%d]", i), "%s", msg)
		}
	}
	return errs
}

// validateHeaders checks the configured headers.
func (c *HTTPConfig) validateHeaders() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "sink."+key, format, args...))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		switch {
		case !validHeaderName(name):
			bad("headers."+name, "not a valid header name")
		case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(name)):
			bad("headers."+name, "set by the sink itself, cannot be configured")
		case queue.HasControl(c.Headers[name]):
			bad("headers."+name, "value must not contain CR, LF or NUL, nor DEL or another byte below 0x20 but tab")
		case c.Auth.Type != "" && c.Auth.Type != AuthNone && http.CanonicalHeaderKey(name) == "Authorization":
			bad("headers."+name, "set by sink.auth (%s), cannot be configured as well", c.Auth.Type)
		}
	}
	return errs
}

// methods are the HTTP methods the sink sends.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// checkAllowedHost checks an entry of sink.allowed_hosts: a host name or
// IP address, with an optional port, and nothing else.
func checkAllowedHost(h string) string {
	if h == "" {
		return "must not be empty"
	}
	u, err := url.Parse("http://" + h)
	if err != nil || u.Host != h || u.Hostname() == "" || u.User != nil {
		return fmt.Sprintf("must be a host name or address with an optional port (api.example.com, 10.0.0.5:8443), got %q", h)
	}
	return ""
}

// LogValue shows the configuration without the URL's credentials and query
// or the headers' values, so that logging it leaks no secret.
func (c HTTPConfig) LogValue() slog.Value {
	shown := "(invalid)"
	if e, err := parseEndpoint(c.URL); err == nil {
		shown = e.redacted
	}
	return slog.GroupValue(
		slog.String("url", shown),
		slog.Duration("timeout", c.Timeout),
		slog.Int("max_in_flight", c.MaxInFlight),
		slog.String("method", c.Method),
		slog.String("encoding", string(c.Encoding)),
		slog.Any("allowed_hosts", c.AllowedHosts),
		slog.String("auth", string(c.Auth.Type)),
		slog.Any("headers", slices.Sorted(maps.Keys(c.Headers))),
	)
}

// endpoint is a parsed sink URL.
type endpoint struct {
	url      string        // the URL without its credentials, to request
	user     *url.Userinfo // the credentials, nil when none
	redacted string        // scheme://host/path, for messages
}

// parseEndpoint checks that raw is an absolute http or https URL. Its error
// never quotes raw, which may hold credentials.
func parseEndpoint(raw string) (endpoint, error) {
	if raw == "" {
		return endpoint{}, errors.New("required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // url.Error quotes the whole URL
		}
		return endpoint{}, fmt.Errorf("not a valid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return endpoint{}, fmt.Errorf("must be an absolute http or https URL, got scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return endpoint{}, errors.New("must be an absolute http or https URL, got no host")
	}
	e := endpoint{user: u.User, redacted: redact(u)}
	u.User = nil
	e.url = u.String()
	return e, nil
}

// redact shows u without credentials, query or fragment.
func redact(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
