package sink

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/queue"
)

// uriRecorder answers 200 and keeps the request line's URI of every
// request, exactly as it was sent.
type uriRecorder struct {
	mu   sync.Mutex
	uris []string
}

func (r *uriRecorder) handle(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.uris = append(r.uris, req.RequestURI)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// take returns the URIs received since the last take.
func (r *uriRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.uris
	r.uris = nil
	return got
}

// request.path is an escaped path, sent as written: its percent-encoding
// is neither decoded nor encoded again, and what a URL path cannot hold
// as is gets encoded.
func TestBoundsPathSentAsWritten(t *testing.T) {
	var rec uriRecorder
	p := newProvider(t, rec.handle)
	tests := []struct {
		base, path, want string
	}{
		{"/api", "/contacts/ann%40example.com", "/api/contacts/ann%40example.com"},
		{"/api", "/a%2Fb", "/api/a%2Fb"},
		{"/api", "/contacts/ann@example.com", "/api/contacts/ann@example.com"},
		{"/api", "/contacts/Ann Smith", "/api/contacts/Ann%20Smith"},
		{"/api", "/a%2Fb c", "/api/a%2Fb%20c"},
		{"/api", "/ünï", "/api/%C3%BCn%C3%AF"},
		{"/api", "/v2/sms", "/api/v2/sms"},
		{"/api/", "/v2/sms", "/api/v2/sms"},
		{"", "/v2/sms", "/v2/sms"},
		{"/t%2Fenant", "/x%40y", "/t%2Fenant/x%40y"}, // sink.url's own encoding is kept
	}
	for _, tt := range tests {
		s := newSink(t, HTTPConfig{URL: p.URL + tt.base})
		j := smsJob(`{"to":"+1555"}`)
		j.Request = &queue.Request{Path: tt.path}
		if err := s.Bounds().Check(j); err != nil {
			t.Errorf("Check of path %q: %v", tt.path, err)
			continue
		}
		if err := s.Send(t.Context(), j); err != nil {
			t.Errorf("Send with path %q: %v", tt.path, err)
			continue
		}
		if got := rec.take(); len(got) != 1 || got[0] != tt.want {
			t.Errorf("sink.url %s + request.path %q: got %q, want [%s]", tt.base, tt.path, got, tt.want)
		}
	}
}

// A request.path with a bad percent-encoding is refused by the bounds too
// (they do not repeat queue.Job.Check), naming request.path.
func TestBoundsPathBadEscape(t *testing.T) {
	b, err := NewBounds(HTTPConfig{URL: "https://api.example.com/api"})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Check(&queue.Job{Request: &queue.Request{Path: "/a%zz"}})
	var fe *queue.FieldError
	if !errors.Is(err, queue.ErrInvalidJob) || !errors.As(err, &fe) || fe.Field != "request.path" ||
		!strings.Contains(fe.Reason, "not a valid URL path") {
		t.Errorf("Check of path /a%%zz: got %v, want a FieldError naming request.path", err)
	}
}
