package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/setting"
)

func TestHTTPConfigSetDefaults(t *testing.T) {
	c := HTTPConfig{URL: "http://127.0.0.1:8080/send"}
	c.SetDefaults()
	if c.Timeout != 5*time.Second {
		t.Errorf("timeout: got %s, want 5s", c.Timeout)
	}
	if c.MaxInFlight != 256 {
		t.Errorf("max_in_flight: got %d, want 256", c.MaxInFlight)
	}
	if c.Now == nil {
		t.Error("Now: got nil, want time.Now")
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: got %v, want nil", err)
	}
}

func TestHTTPConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  HTTPConfig
		want []string // each must appear in the error; none means valid
	}{
		{name: "valid http", cfg: HTTPConfig{URL: "http://127.0.0.1:8080/send", Timeout: time.Second, MaxInFlight: 1}},
		{name: "valid https with credentials and headers", cfg: HTTPConfig{
			URL: "https://u:p@api.example.com/v1?x=1", Timeout: time.Second, MaxInFlight: 8,
			Headers: map[string]string{"X-Api-Key": "k", "Authorization": "Bearer t"}}},
		{name: "missing url", cfg: HTTPConfig{Timeout: time.Second, MaxInFlight: 1},
			want: []string{"sink.url: required"}},
		{name: "relative url", cfg: HTTPConfig{URL: "/send", Timeout: time.Second, MaxInFlight: 1},
			want: []string{`sink.url: must be an absolute http or https URL, got scheme ""`}},
		{name: "no host", cfg: HTTPConfig{URL: "http:///send", Timeout: time.Second, MaxInFlight: 1},
			want: []string{"sink.url: must be an absolute http or https URL, got no host"}},
		{name: "ftp", cfg: HTTPConfig{URL: "ftp://example.com/x", Timeout: time.Second, MaxInFlight: 1},
			want: []string{`sink.url: must be an absolute http or https URL, got scheme "ftp"`}},
		{name: "host and port without scheme", cfg: HTTPConfig{URL: "localhost:8080", Timeout: time.Second, MaxInFlight: 1},
			want: []string{`sink.url: must be an absolute http or https URL, got scheme "localhost"`}},
		{name: "every problem at once", cfg: HTTPConfig{
			URL: "http://ann:s3cret@[::1", Timeout: -time.Second, MaxInFlight: -1,
			Headers: map[string]string{"Idempotency-Key": "x", "bad name": "v", "X-Ok": "a\r\nInjected: 1"}},
			want: []string{
				"sink.url: not a valid URL: missing ']' in host",
				"sink.timeout: must be positive, got -1s",
				"sink.max_in_flight: must be between 1 and 65536, got -1",
				"sink.headers.Idempotency-Key: set by the sink itself, cannot be configured",
				"sink.headers.bad name: not a valid header name",
				"sink.headers.X-Ok: value must not contain CR, LF or NUL",
			}},
		{name: "zero timeout and max_in_flight without SetDefaults", cfg: HTTPConfig{URL: "http://h/"},
			want: []string{"sink.timeout: must be positive, got 0s", "sink.max_in_flight: must be between 1 and 65536, got 0"}},
		{name: "reserved header in any case", cfg: HTTPConfig{URL: "http://h/", Timeout: time.Second, MaxInFlight: 1,
			Headers: map[string]string{"x-sluice-lane": "vip"}},
			want: []string{"sink.headers.x-sluice-lane: set by the sink itself"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want an error matching ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", err, w)
				}
			}
			if got := strings.Count(err.Error(), "\n") + 1; got != len(tt.want) {
				t.Errorf("problems reported: got %d, want %d (%q)", got, len(tt.want), err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("got %q, which shows the URL's password", err)
			}
		})
	}
}

func TestNewHTTPInvalid(t *testing.T) {
	_, err := NewHTTP(HTTPConfig{URL: "ftp://x", Timeout: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"sink.url", "sink.timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to name %q", err, want)
		}
	}
}

func TestHTTPConfigLogValueHidesSecrets(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := HTTPConfig{URL: "https://ann:s3cret@api.example.com/send?key=tok", Timeout: time.Second,
		MaxInFlight: 4, Headers: map[string]string{"X-Api-Key": "k-999"}}
	log.Info("sink", "config", cfg)
	out := buf.String()
	for _, secret := range []string{"ann", "s3cret", "tok", "k-999"} {
		if strings.Contains(out, secret) {
			t.Errorf("got %q, which shows %q", out, secret)
		}
	}
	for _, want := range []string{"config.url=https://api.example.com/send", "config.max_in_flight=4", "X-Api-Key"} {
		if !strings.Contains(out, want) {
			t.Errorf("got %q, want it to contain %q", out, want)
		}
	}
}

func TestHeadersHideTheirValues(t *testing.T) {
	h := Headers{"X-Api-Key": "k-999", "Authorization": "Bearer k-999"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("sink", "headers", h)
	asJSON, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{
		"%v":   fmt.Sprintf("%v", h),
		"%+v":  fmt.Sprintf("%+v", h),
		"%#v":  fmt.Sprintf("%#v", h),
		"%s":   fmt.Sprintf("%s %q %x", h, h, h),
		"slog": logged.String(),
		"json": string(asJSON),
	}
	for how, text := range shown {
		if strings.Contains(text, "k-999") {
			t.Errorf("%s: got %s, which shows a header's value", how, text)
		}
		if !strings.Contains(text, "X-Api-Key") && how != "%s" {
			t.Errorf("%s: got %s, want the header's name", how, text)
		}
	}
	if got := h["X-Api-Key"]; got != "k-999" {
		t.Errorf("h[X-Api-Key]: got %q, want the value", got)
	}
}

func TestValidateReportsFieldErrors(t *testing.T) {
	err := (&HTTPConfig{URL: "ftp://x", Timeout: -1, MaxInFlight: 1}).Validate()
	var keys []string
	for _, fe := range setting.Errors(err) {
		if !errors.Is(fe, ErrInvalidConfig) {
			t.Errorf("%v: does not wrap ErrInvalidConfig", fe)
		}
		keys = append(keys, fe.Key)
	}
	if got, want := strings.Join(keys, " "), "sink.url sink.timeout"; got != want {
		t.Errorf("got problems about %q, want %q", got, want)
	}
}
