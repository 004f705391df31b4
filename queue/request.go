package queue

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Request is the part of the provider's request that a job chooses itself,
// as a Google Cloud Tasks task carries its HTTP request. Every field is
// optional; the sink's configuration gives the rest and bounds what a job
// may choose (sink.HTTPConfig: the method, the base URL and its host, the
// allowed other hosts, the headers the sink sets).
//
// On the wire: {"method": "PUT", "path": "/v2/messages", "query":
// {"priority": "high"}, "headers": {"X-Tenant": "acme"}}.
type Request struct {
	// Method is the HTTP method: GET, POST, PUT, PATCH or DELETE. Empty
	// means the sink's (sink.method). A GET or DELETE is sent without a body.
	Method string `json:"method,omitempty"`
	// URL replaces the sink's base URL (sink.url): an absolute http or https
	// URL whose host is the base URL's or one listed in sink.allowed_hosts.
	// When sink.url is https it must be https too, whichever the host, so
	// that the sink's credentials never travel in clear (an http sink.url
	// may be named with https). It may not carry credentials or a
	// fragment. Empty means sink.url.
	URL string `json:"url,omitempty"`
	// Path is appended to the path of the URL (sink.url, or URL): with
	// sink.url http://host/api and path /v2/sms the request goes to
	// http://host/api/v2/sms. It is an escaped path, sent as written,
	// percent-encoding included: /contacts/ann%40example.com goes as is, and
	// %2F stays within its segment; a byte a URL path cannot hold as it is
	// (a space) is percent-encoded. It starts with '/' and holds no "." or
	// ".." segment, escaped or not (%2e%2e), no '?' and no '#'.
	Path string `json:"path,omitempty"`
	// Query adds parameters to the URL's query. A parameter that the
	// sink's URL already has cannot be set (it may hold an API key).
	Query map[string]string `json:"query,omitempty"`
	// Headers adds request headers. The headers the sink sets itself
	// (Content-Type, Authorization, Idempotency-Key, X-Sluice-*, the
	// hop-by-hop ones) and those configured in sink.headers cannot be set.
	Headers map[string]string `json:"headers,omitempty"`
	// ContentType is the Content-Type of the body when the sink's encoding
	// is raw. Empty means sink.content_type. Refused with other encodings.
	ContentType string `json:"content_type,omitempty"`
}

// Methods a job's Request may name.
var requestMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// maxRequestBytes bounds each string of a Request.
const maxRequestBytes = 2048

// check reports what is malformed in r whatever the sink: each a
// *FieldError naming "request.<field>".
func (r *Request) check() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: "request." + field, Reason: fmt.Sprintf(format, args...)})
	}
	if r.Method != "" && !slices.Contains(requestMethods, r.Method) {
		bad("method", "must be one of %s, got %q", strings.Join(requestMethods, ", "), r.Method)
	}
	if r.URL != "" {
		if msg := checkRequestURL(r.URL); msg != "" {
			bad("url", "%s", msg)
		}
	}
	if r.Path != "" {
		if msg := checkRequestPath(r.Path); msg != "" {
			bad("path", "%s", msg)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Query)) {
		switch v := r.Query[k]; {
		case k == "" || !utf8.ValidString(k) || len(k) > maxRequestBytes:
			bad("query", "parameter name %q must be 1-%d bytes of UTF-8", k, maxRequestBytes)
		case !utf8.ValidString(v) || len(v) > maxRequestBytes:
			bad("query."+k, "must be at most %d bytes of UTF-8", maxRequestBytes)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		if msg := CheckHeader(k, r.Headers[k]); msg != "" {
			bad("headers."+k, "%s", msg)
		}
	}
	if r.ContentType != "" && (len(r.ContentType) > 256 || HasControl(r.ContentType)) {
		bad("content_type", "must be at most 256 bytes, without CR, LF, NUL, DEL or another byte below 0x20 but tab")
	}
	return errs
}

func checkRequestURL(raw string) string {
	if len(raw) > maxRequestBytes || !utf8.ValidString(raw) {
		return fmt.Sprintf("must be at most %d bytes of UTF-8", maxRequestBytes)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("must be an absolute http or https URL, got scheme %q", u.Scheme)
	case u.Host == "":
		return "must be an absolute http or https URL, got no host"
	case u.User != nil:
		return "must not carry credentials (configure sink.auth)"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not have a fragment"
	}
	return ""
}

func checkRequestPath(p string) string {
	switch {
	case len(p) > maxRequestBytes || !utf8.ValidString(p):
		return fmt.Sprintf("must be at most %d bytes of UTF-8", maxRequestBytes)
	case !strings.HasPrefix(p, "/"):
		return fmt.Sprintf("must start with '/', got %q", p)
	case strings.ContainsAny(p, "?#\\\x00\r\n"):
		return "must not contain '?', '#', '\\' or control characters (use request.query)"
	}
	if seg := dotSegment(p); seg != "" {
		return fmt.Sprintf("must not have a %q segment", seg)
	}
	decoded, err := url.PathUnescape(p)
	if err != nil {
		return "not a valid URL path (bad percent-encoding)"
	}
	if seg := dotSegment(decoded); seg != "" {
		return fmt.Sprintf("must not have a %q segment, even percent-encoded", seg)
	}
	return ""
}

// dotSegment returns the first "." or ".." segment of path p, "" if none.
func dotSegment(p string) string {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return seg
		}
	}
	return ""
}

// reservedRequestHeaders are set by the sink, or by Go's HTTP client, and
// cannot be set by a job or by configuration.
var reservedRequestHeaders = []string{
	"Authorization", "Content-Type", "Content-Length", "Host", "Transfer-Encoding", "Connection",
	"Te", "Trailer", "Upgrade", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection",
	"Idempotency-Key",
}

// CheckHeader reports, as a reason, what is wrong with a header a job asks
// for: a name that is not a token, one the sink sets itself (see
// Request.Headers), or a value over 2 KiB, not UTF-8, or with a control
// character (any byte below 0x20 but horizontal tab, or DEL), which
// net/http would refuse to send. It returns "" for a header a job may set.
// Sinks check the header against their configured headers besides.
func CheckHeader(name, value string) string {
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !validHeaderName(name):
		return "not a valid header name"
	case slices.Contains(reservedRequestHeaders, canon) || strings.HasPrefix(canon, "X-Sluice-"):
		return "set by the sink itself, cannot be set by a job"
	case len(value) > maxRequestBytes:
		return fmt.Sprintf("value longer than %d bytes", maxRequestBytes)
	case !utf8.ValidString(value) || HasControl(value):
		return "value must be UTF-8 without control characters, that is without CR, LF, NUL, DEL or another byte below 0x20 but tab"
	}
	return ""
}

// HasControl reports whether header value v has a byte that a header field
// value may not hold (RFC 9110, section 5.5), which net/http refuses to
// send: a control character other than horizontal tab. Bytes from 0x80
// are allowed (UTF-8). CheckHeader applies it to a job's headers, and the
// sink to its configured ones.
func HasControl(v string) bool {
	for _, c := range []byte(v) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

func validHeaderName(name string) bool {
	if name == "" || len(name) > 256 {
		return false
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
