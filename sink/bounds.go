package sink

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/queue"
)

// Bounds are what the HTTP sink's configuration lets a job choose of its
// request (queue.Job.Request): the host (sink.url's, or one of
// sink.allowed_hosts; over https when sink.url is https), query
// parameters other than sink.url's, headers other than the sink's own and
// the configured ones, and a payload the encoding can carry. The HTTP
// sink checks every job against them before it sends, and a producer that
// knows the configuration checks at enqueue (producer.WithJobCheck(b.Check)),
// so that a job out of bounds is refused while its producer can still be
// told. Bounds hold no secret. A Bounds is safe for concurrent use.
type Bounds struct {
	base      *url.URL   // sink.url without credentials
	baseQuery url.Values // sink.url's query
	allowed   []string   // sink.allowed_hosts
	method    string
	encoding  Encoding
	rawType   string   // sink.content_type
	static    []string // canonical names of sink.headers
	plain     target   // the request of a job that chooses nothing of it
}

// NewBounds returns the bounds of cfg. It applies SetDefaults to a copy
// of cfg and checks the keys that shape a request (url, method, encoding,
// content_type, allowed_hosts, headers), not the others, and reads no
// secret: a producer can call it on the dispatchers' configuration.
func NewBounds(cfg HTTPConfig) (*Bounds, error) {
	cfg.SetDefaults()
	if err := errors.Join(cfg.validateShape()...); err != nil {
		return nil, fmt.Errorf("sink: bounds: %w", err)
	}
	u, _ := url.Parse(cfg.URL) // checked by validateShape
	u.User = nil
	b := &Bounds{base: u, baseQuery: u.Query(), allowed: cfg.AllowedHosts, method: cfg.Method,
		encoding: cfg.Encoding, rawType: cfg.ContentType}
	for name := range cfg.Headers {
		b.static = append(b.static, http.CanonicalHeaderKey(name))
	}
	plain, err := b.build(&queue.Request{})
	if err != nil {
		return nil, fmt.Errorf("sink: bounds: %w", err)
	}
	b.plain = plain
	return b, nil
}

// Check reports what of job j the sink would refuse to send: each problem
// a *queue.FieldError naming the field ("request.url: host evil.example is
// neither sink.url's nor in sink.allowed_hosts", "payload: ..."), joined,
// matching queue.ErrInvalidJob; nil when j can be sent. It does not repeat
// the queue's own checks (queue.Job.Check).
func (b *Bounds) Check(j *queue.Job) error {
	_, err := b.target(j)
	return err
}

// target is one job's request, before its body is encoded.
type target struct {
	method   string
	url      string // to request
	redacted string // scheme://host/path, for messages
	header   http.Header
	own      bool // to sink.url's host
}

// target builds the request j asks for within the bounds. A job that
// chooses nothing of its request (most jobs) gets the one built when the
// bounds were made, whose header the caller must not change.
func (b *Bounds) target(j *queue.Job) (target, error) {
	if j.Request == nil {
		if err := b.checkPayload(j, b.plain.method); err != nil {
			return target{}, err
		}
		return b.plain, nil
	}
	t, err := b.build(j.Request)
	if err := errors.Join(err, b.checkPayload(j, cmp.Or(j.Request.Method, b.method))); err != nil {
		return target{}, err
	}
	return t, nil
}

// checkPayload reports a payload the form encoding cannot carry in a
// request with method.
func (b *Bounds) checkPayload(j *queue.Job, method string) error {
	if b.encoding == EncodingForm && hasBody(method) {
		if _, err := formBody(j.Payload); err != nil {
			return &queue.FieldError{Field: "payload", Reason: err.Error()}
		}
	}
	return nil
}

// build builds the request r asks for within the bounds, all but the
// payload's check.
func (b *Bounds) build(r *queue.Request) (target, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &queue.FieldError{Field: field, Reason: fmt.Sprintf(format, args...)})
	}
	t := target{method: b.method, own: true, header: http.Header{}}
	if r.Method != "" {
		t.method = r.Method
	}
	u := *b.base
	query := maps.Clone(b.baseQuery)
	if r.URL != "" {
		ju, err := url.Parse(r.URL)
		switch {
		case err != nil || (ju.Scheme != "http" && ju.Scheme != "https") || ju.Host == "" || ju.User != nil:
			bad("request.url", "must be an absolute http or https URL without credentials")
		case !strings.EqualFold(ju.Host, b.base.Host) && !b.allows(ju):
			bad("request.url", "host %s is neither sink.url's (%s) nor in sink.allowed_hosts", ju.Host, b.base.Host)
		case b.base.Scheme == "https" && ju.Scheme != "https":
			bad("request.url", "must be https, not %s, because sink.url is (the sink's credentials never travel in clear)", ju.Scheme)
		case strings.EqualFold(ju.Host, b.base.Host):
			u, query = *ju, ju.Query()
			for k, vs := range b.baseQuery {
				query[k] = vs // the base's parameters stay the base's
			}
		default: // an allowed host
			u, query, t.own = *ju, ju.Query(), false
		}
	}
	if r.Path != "" {
		if err := appendPath(&u, r.Path); err != nil {
			bad("request.path", "%v", err)
		}
	}
	if query == nil {
		query = url.Values{}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Query)) {
		if t.own && b.baseQuery.Has(k) {
			bad("request.query."+k, "set by sink.url, cannot be set by a job")
			continue
		}
		query.Set(k, r.Query[k])
	}
	u.RawQuery = query.Encode()
	u.Fragment = ""
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		canon := http.CanonicalHeaderKey(k)
		switch msg := queue.CheckHeader(k, r.Headers[k]); {
		case msg != "":
			bad("request.headers."+k, "%s", msg)
		case slices.Contains(b.static, canon):
			bad("request.headers."+k, "set by sink.headers, cannot be set by a job")
		default:
			t.header.Set(canon, r.Headers[k])
		}
	}
	if r.ContentType != "" && b.encoding != EncodingRaw {
		bad("request.content_type", "only with sink.encoding raw (the sink's encoding is %s)", b.encoding)
	}
	if err := errors.Join(errs...); err != nil {
		return target{}, err
	}
	t.url = u.String()
	t.redacted = redact(&u)
	return t, nil
}

// appendPath appends the escaped path p (request.path) to u's path, as
// written: its percent-encoding ("%40", "%2F") is sent as is, and so is
// u's own (sink.url's RawPath). A byte that cannot appear in a URL path as
// it is (a space, a non-ASCII byte) is percent-encoded.
func appendPath(u *url.URL, p string) error {
	path, err := url.PathUnescape(p) // a path only: "//x" names no host
	if err != nil {
		return fmt.Errorf("not a valid URL path: %w", err)
	}
	base := u.EscapedPath()
	if strings.HasSuffix(base, "/") { // then u.Path ends with '/' too
		base, u.Path = strings.TrimSuffix(base, "/"), strings.TrimSuffix(u.Path, "/")
	}
	u.Path += path
	u.RawPath = base + escapePath(p)
	return nil
}

// escapePath returns the escaped path p with every byte that a URL path
// cannot hold as it is percent-encoded, and the rest, "%XX" included, as
// written.
func escapePath(p string) string {
	const upperhex = "0123456789ABCDEF"
	var sb strings.Builder
	sb.Grow(len(p))
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			strings.IndexByte("-._~/%!$&'()*+,;=:@[]", c) >= 0:
			sb.WriteByte(c)
		default:
			sb.WriteByte('%')
			sb.WriteByte(upperhex[c>>4])
			sb.WriteByte(upperhex[c&15])
		}
	}
	return sb.String()
}

// allows reports whether u's host is in sink.allowed_hosts: an entry
// without a port allows every port of its host.
func (b *Bounds) allows(u *url.URL) bool {
	for _, h := range b.allowed {
		if strings.EqualFold(h, u.Host) || (!strings.Contains(h, ":") && strings.EqualFold(h, u.Hostname())) {
			return true
		}
	}
	return false
}

// hasBody reports whether a request with method carries the payload.
func hasBody(method string) bool { return method != http.MethodGet && method != http.MethodDelete }
