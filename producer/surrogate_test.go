package producer

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/queue"
)

// A lone UTF-16 surrogate escape decodes to U+FFFD, so two keys that
// differ only in one ("otp-\ud800", "otp-\udbff") would read the same and
// the second job be dropped as a duplicate: such a value is refused,
// naming its field. Pairs, other escapes and U+FFFD written out pass.
func TestParseJobRefusesLoneSurrogates(t *testing.T) {
	for _, tc := range []struct {
		line, field string // field "" means accepted
	}{
		{`{"key":"otp-\ud800","payload":1}`, "key"},
		{`{"key":"otp-\udbff","payload":1}`, "key"},
		{`{"key":"otp-\udc00x","payload":1}`, "key"},
		{`{"user":"a\ud800\u0041","payload":1}`, "user"},
		{`{"id":"\ud83d","payload":1}`, "id"},
		{`{"request":{"headers":{"X-A":"\ud800"}},"payload":1}`, "request"},
		{`{"key":"otp-\ud83d\ude00","payload":1}`, ""}, // a pair: 😀
		{`{"key":"otp-\\ud800","payload":1}`, ""},      // an escaped backslash, then text
		{`{"key":"otp-\ufffd","payload":1}`, ""},       // U+FFFD written out
		{`{"key":"otp-\u00e9\"\n","payload":1}`, ""},
		{`{"key":"k","payload":"\ud800"}`, ""}, // the payload is sent as written
	} {
		_, err := ParseJob([]byte(tc.line))
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", tc.line, err)
			}
			continue
		}
		fe, ok := errors.AsType[*queue.FieldError](err)
		if !ok || fe.Field != tc.field || !strings.Contains(fe.Reason, "surrogate") {
			t.Errorf("%s: %v, want a surrogate error about %s", tc.line, err, tc.field)
		}
	}
}
