package sink

import (
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

	"github.com/sluicehq/sluice/setting"
)

// HTTPConfig configures the HTTP sink (the keys under sink: in the YAML
// file). Zero values mean the documented default.
type HTTPConfig struct {
	// URL is where jobs are POSTed: an absolute http or https URL.
	// Required. Credentials in it (https://user:pass@host/) are sent as
	// basic authentication, unless Headers has an Authorization, and never
	// appear in errors or logs.
	URL string `yaml:"url"`
	// Timeout bounds one request, from connecting to reading the answer.
	// Zero means 5s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxInFlight bounds the connections to the provider, and so the
	// requests in flight at once: a request beyond it waits for a
	// connection (within its Timeout). Idle connections are kept up to the
	// same number and reused. Zero means 256.
	MaxInFlight int `yaml:"max_in_flight"`
	// Headers are extra headers sent with every request, such as an API
	// key. Optional. They cannot replace the headers the sink sets itself
	// (Content-Type, Idempotency-Key, X-Sluice-*). Their values never
	// appear in errors or logs.
	Headers Headers `yaml:"headers"`
	// Now is the clock used to turn a Retry-After date into a duration.
	// Zero means time.Now.
	Now func() time.Time `yaml:"-"`
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
}

// Validate reports every problem of the configuration, each a
// *setting.Error naming its key as in the YAML file ("sink.timeout: must be
// positive, got -1s") and wrapping ErrInvalidConfig, joined with
// errors.Join. Call SetDefaults first. No message shows the URL's
// credentials or a header's value.
func (c *HTTPConfig) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "sink."+key, format, args...))
	}
	if _, err := parseEndpoint(c.URL); err != nil {
		bad("url", "%v", err)
	}
	if c.Timeout <= 0 {
		bad("timeout", "must be positive, got %s", c.Timeout)
	}
	if c.MaxInFlight < 1 || c.MaxInFlight > 1<<16 {
		bad("max_in_flight", "must be between 1 and 65536, got %d", c.MaxInFlight)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		switch {
		case !validHeaderName(name):
			bad("headers."+name, "not a valid header name")
		case slices.Contains(reservedHeaders, http.CanonicalHeaderKey(name)):
			bad("headers."+name, "set by the sink itself, cannot be configured")
		case strings.ContainsAny(c.Headers[name], "\r\n\x00"):
			bad("headers."+name, "value must not contain CR, LF or NUL")
		}
	}
	return errors.Join(errs...)
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
