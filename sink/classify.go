package sink

import (
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// classify turns the provider's answer into nil, a *ThrottledError or a
// *StatusError. It reads at most MaxBodyExcerpt+1 bytes of the body.
func (h *HTTP) classify(resp *http.Response) error {
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		return &ThrottledError{Status: s, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), resp.Header.Get("Date"), h.now())}
	}
	e := &StatusError{Status: resp.StatusCode}
	e.Body, e.Truncated = excerpt(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if loc, err := resp.Location(); err == nil {
			e.Location = redact(loc)
		}
	}
	return e
}

// parseRetryAfter reads a Retry-After value, either delay-seconds or an
// HTTP-date (RFC 9110, section 10.2.3), as a duration from now. It returns
// zero for an empty, unreadable, negative or past value. An HTTP-date is
// read against the answer's own Date header when it has a readable one,
// both being the provider's clock, and against now only without: a
// replica whose clock runs a minute behind the provider's would otherwise
// wait a minute too long, and one running ahead not at all.
func parseRetryAfter(v, date string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if v[0] == '-' {
		return 0
	}
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return secondsDuration(secs) // ParseUint gives the largest value on overflow
	}
	if t, err := http.ParseTime(v); err == nil {
		if d, err := http.ParseTime(strings.TrimSpace(date)); err == nil {
			now = d
		}
		return max(t.Sub(now), 0)
	}
	return 0
}

// secondsDuration converts seconds to a duration, more than the largest
// duration to the largest.
func secondsDuration(secs uint64) time.Duration {
	if secs > uint64(math.MaxInt64/time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(secs) * time.Second
}

// excerpt reads the start of a body for an error message: at most
// MaxBodyExcerpt bytes, valid UTF-8, control characters as spaces, trimmed.
// truncated reports whether the body went on.
func excerpt(body io.Reader) (text string, truncated bool) {
	buf := make([]byte, MaxBodyExcerpt+1)
	n, _ := io.ReadFull(body, buf)
	truncated = n > MaxBodyExcerpt
	s := strings.ToValidUTF8(string(buf[:min(n, MaxBodyExcerpt)]), "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s), truncated
}
