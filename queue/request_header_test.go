package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// CheckHeader refuses every value net/http would refuse to send (a
// control character other than horizontal tab), and Job.Check names the
// header.
func TestCheckHeaderControlCharacters(t *testing.T) {
	tests := []struct {
		value string
		ok    bool
	}{
		{"\x01", false},
		{"a\x01b", false},
		{"\x7f", false},
		{"a\x7fb", false},
		{"\x1f", false},
		{"\r", false},
		{"\n", false},
		{"\x00", false},
		{"a\tb", true},
		{"ünïcode", true},
		{"plain value, with (punctuation) ~!", true},
		{"\xff", false}, // not UTF-8
	}
	for _, tt := range tests {
		msg := CheckHeader("X-Tenant", tt.value)
		switch {
		case tt.ok && msg != "":
			t.Errorf("CheckHeader(%q): got %q, want accepted", tt.value, msg)
		case !tt.ok && !strings.HasPrefix(msg, "value must be UTF-8 without control characters"):
			t.Errorf("CheckHeader(%q): got %q, want %q...", tt.value, msg, "value must be UTF-8 without control characters")
		}
		j := Job{Lane: "vip", Cost: 1, Payload: json.RawMessage(`1`),
			Request: &Request{Headers: map[string]string{"X-Tenant": tt.value}}}
		err := j.Check(Limits{Lanes: []string{"vip"}})
		var fe *FieldError
		switch {
		case tt.ok && err != nil:
			t.Errorf("Job.Check with header value %q: got %v, want nil", tt.value, err)
		case !tt.ok && (!errors.Is(err, ErrInvalidJob) || !errors.As(err, &fe) || fe.Field != "request.headers.X-Tenant" ||
			!strings.Contains(err.Error(), "control characters")):
			t.Errorf("Job.Check with header value %q: got %v, want a FieldError naming request.headers.X-Tenant", tt.value, err)
		}
	}
}

// request.path is an escaped path: a "." or ".." segment is refused
// written plainly or percent-encoded, and a bad escape is refused.
func TestCheckRequestPathSegments(t *testing.T) {
	tests := []struct {
		path string
		want string // in the reason; "" for valid
	}{
		{"/contacts/ann%40example.com", ""},
		{"/a%2Fb", ""},
		{"/a b", ""},
		{"/v2/sms", ""},
		{"/a/../b", `".." segment`},
		{"/a/./b", `"." segment`},
		{"/%2e%2e/b", `".." segment`},
		{"/a/%2E%2E", `".." segment`},
		{"/a/.%2e/b", `".." segment`},
		{"/a/%2e/b", `"." segment`},
		{"/a%2F..%2Fb", `".." segment`},
		{"/a%zz", "not a valid URL path"},
	}
	for _, tt := range tests {
		err := (&Request{Path: tt.path}).check()
		switch {
		case tt.want == "" && len(err) != 0:
			t.Errorf("path %q: got %v, want none", tt.path, err)
		case tt.want != "" && (len(err) != 1 || !strings.Contains(err[0].Error(), "request.path: ") ||
			!strings.Contains(err[0].Error(), tt.want)):
			t.Errorf("path %q: got %v, want request.path: ...%s", tt.path, err, tt.want)
		}
	}
}
