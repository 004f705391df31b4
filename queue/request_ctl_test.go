package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// request.content_type becomes the request's Content-Type header: Job.Check
// refuses it by CheckHeader's rule (no control character but tab), naming
// the field, so that net/http does not refuse it at every attempt to send.
func TestCheckRequestContentTypeControlCharacters(t *testing.T) {
	tests := []struct {
		value string
		ok    bool
	}{
		{"a\x01b", false},
		{"\x01", false},
		{"\x1f", false},
		{"\x7f", false},
		{"text/plain\x7f", false},
		{"text/plain\r\nX-Injected: 1", false},
		{"\n", false},
		{"\x00", false},
		{"text/plain;\tcharset=utf-8", true},
		{"application/vnd.sms+json", true},
		{"text/plain; name=ünïcode", true},
	}
	for _, tt := range tests {
		if got := CheckHeader("X-Content", tt.value) == ""; got != tt.ok {
			t.Fatalf("CheckHeader(%q) accepts: got %v, want %v (the table is wrong)", tt.value, got, tt.ok)
		}
		j := Job{Lane: "vip", Cost: 1, Payload: json.RawMessage(`1`), Request: &Request{ContentType: tt.value}}
		err := j.Check(Limits{Lanes: []string{"vip"}})
		var fe *FieldError
		switch {
		case tt.ok && err != nil:
			t.Errorf("content_type %q: got %v, want nil", tt.value, err)
		case !tt.ok && (!errors.Is(err, ErrInvalidJob) || !errors.As(err, &fe) || fe.Field != "request.content_type" ||
			!strings.Contains(fe.Reason, "below 0x20 but tab")):
			t.Errorf("content_type %q: got %v, want a FieldError naming request.content_type and the control characters", tt.value, err)
		}
	}
}
