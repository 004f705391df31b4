package sink

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/setting"
)

// controlValues are header values with and without a byte that net/http
// refuses to send (a control character other than horizontal tab).
var controlValues = []struct {
	value string
	ok    bool
}{
	{"a\x01b", false},
	{"\x01", false},
	{"\x1f", false},
	{"\x7f", false},
	{"a\x7fb", false},
	{"\r", false},
	{"\n", false},
	{"\x00", false},
	{"a\tb", true},
	{"ünïcode", true},
	{"text/plain; charset=utf-8", true},
}

// sink.headers values and sink.content_type are refused, naming the key,
// exactly when net/http would refuse to send them: a value Validate lets
// through must not fail every attempt at send time.
func TestHTTPConfigValidateControlCharacters(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	for _, tt := range controlValues {
		sends := sendsHeader(t, client, srv.URL, tt.value)
		if sends != tt.ok {
			t.Fatalf("net/http sends %q: got %v, want %v (the table is wrong)", tt.value, sends, tt.ok)
		}
		for _, c := range []struct {
			key string
			cfg HTTPConfig
		}{
			{"sink.headers.X-Tenant", HTTPConfig{URL: srv.URL, Headers: map[string]string{"X-Tenant": tt.value}}},
			{"sink.content_type", HTTPConfig{URL: srv.URL, Encoding: EncodingRaw, ContentType: tt.value}},
		} {
			c.cfg.SetDefaults()
			err := c.cfg.Validate()
			if tt.ok {
				if err != nil {
					t.Errorf("%s %q: got %v, want nil", c.key, tt.value, err)
				}
				continue
			}
			es := setting.Errors(err)
			if !errors.Is(err, ErrInvalidConfig) || len(es) != 1 || es[0].Key != c.key ||
				!strings.Contains(es[0].Problem, "below 0x20 but tab") {
				t.Errorf("%s %q: got %v, want one error naming %s and the control characters", c.key, tt.value, err, c.key)
			}
			if err != nil && strings.Contains(err.Error(), tt.value) {
				t.Errorf("%s %q: got %q, which shows the value", c.key, tt.value, err)
			}
		}
	}
}

// sendsHeader reports whether net/http sends a request with a header of
// value v.
func sendsHeader(t *testing.T, client *http.Client, url, v string) bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant", v)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}
