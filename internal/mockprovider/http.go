package mockprovider

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// serveJob receives one job: it records the arrival, waits the latency and
// answers. A body that is not JSON, sent as JSON (a JSON Content-Type, or
// none), is answered 400 without asking the
// Responder; a body over 16 MiB is answered 413 and not recorded.
func (p *Provider) serveJob(w http.ResponseWriter, r *http.Request) {
	at := arrivedAt(r.Context(), time.Now()) // when the request reached this host (recvstamp.go), before any lock
	defer p.open.begin()()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "body larger than 16 MiB")
		}
		return // otherwise the client went away mid-body
	}
	_, ans := p.decide(r, body, at)
	if ans.Delay > 0 {
		t := time.NewTimer(ans.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if ans.RetryAfter > 0 {
		h.Set("Retry-After", retryAfterSeconds(ans.RetryAfter))
	}
	w.WriteHeader(ans.Status)
	io.WriteString(w, ans.Body)
}

// serveReport answers GET /report[?since=RFC3339&until=RFC3339] with the
// Report as JSON.
func (p *Provider) serveReport(w http.ResponseWriter, r *http.Request) {
	since, until, err := parseRange(r.URL.Query())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(p.Report(since, until))
}

// serveArrivals answers GET /arrivals[?since=...&until=...] with one JSON
// Arrival per line, oldest first.
func (p *Provider) serveArrivals(w http.ResponseWriter, r *http.Request) {
	since, until, err := parseRange(r.URL.Query())
	if err != nil {
		writeJSONError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, a := range Between(p.Arrivals(), since, until) {
		if enc.Encode(a) != nil {
			return
		}
	}
}

// serveReset answers POST /reset: everything recorded is forgotten.
func (p *Provider) serveReset(w http.ResponseWriter, _ *http.Request) {
	p.Reset()
	w.WriteHeader(http.StatusNoContent)
}

// parseRange reads the optional since and until query parameters.
func parseRange(q url.Values) (since, until time.Time, err error) {
	for _, f := range []struct {
		key string
		dst *time.Time
	}{{"since", &since}, {"until", &until}} {
		v := q.Get(f.key)
		if v == "" {
			continue
		}
		t, perr := time.Parse(time.RFC3339Nano, v)
		if perr != nil {
			return since, until, fmt.Errorf("%s: %q is not an RFC 3339 time", f.key, v)
		}
		*f.dst = t
	}
	return since, until, nil
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
