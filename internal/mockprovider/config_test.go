package mockprovider_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/mockprovider"
)

func TestConfigDefaults(t *testing.T) {
	var c mockprovider.Config
	c.SetDefaults()
	if c.Listen != "127.0.0.1:8080" || c.Path != "/send" || c.RetryAfter != time.Second || c.MaxArrivals != 1_000_000 {
		t.Errorf("defaults: got %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  mockprovider.Config
		keys []string // every key the error must name; none means valid
	}{
		{"loopback v4", mockprovider.Config{Listen: "127.0.0.5:0"}, nil},
		{"loopback v6", mockprovider.Config{Listen: "[::1]:9000"}, nil},
		{"localhost", mockprovider.Config{Listen: "localhost:9000"}, nil},
		{"all interfaces refused", mockprovider.Config{Listen: ":8080"}, []string{"listen:", "allow-remote"}},
		{"remote refused", mockprovider.Config{Listen: "10.0.0.1:8080"}, []string{"listen:"}},
		{"remote allowed", mockprovider.Config{Listen: "0.0.0.0:8080", AllowRemote: true}, nil},
		{"no port", mockprovider.Config{Listen: "127.0.0.1"}, []string{"listen:"}},
		{"bad port", mockprovider.Config{Listen: "127.0.0.1:99999"}, []string{"listen:"}},
		{"path", mockprovider.Config{Path: "send"}, []string{"path:"}},
		{"reserved path", mockprovider.Config{Path: "/report"}, []string{"path:", "reserved"}},
		{"shares", mockprovider.Config{ThrottleShare: 1.5, ErrorShare: -0.1, RejectShare: math.NaN()},
			[]string{"throttle-share:", "error-share:", "reject-share:"}},
		{"share sum", mockprovider.Config{ThrottleShare: 0.5, ErrorShare: 0.3, RejectShare: 0.3}, []string{"at most 1"}},
		{"all shares full", mockprovider.Config{ThrottleShare: 0.5, ErrorShare: 0.25, RejectShare: 0.25}, nil},
		{"negatives", mockprovider.Config{Latency: -1, RetryAfter: -time.Second, Cap: -1, MaxArrivals: -1},
			[]string{"latency:", "retry-after:", "cap:", "max-arrivals:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.SetDefaults()
			err := tt.cfg.Validate()
			if len(tt.keys) == 0 {
				if err != nil {
					t.Fatalf("got %v, want valid", err)
				}
				return
			}
			if !errors.Is(err, mockprovider.ErrInvalidConfig) {
				t.Fatalf("got %v, want an ErrInvalidConfig", err)
			}
			for _, k := range tt.keys {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("got %q, want it to name %q", err, k)
				}
			}
			if _, nerr := mockprovider.New(tt.cfg); !errors.Is(nerr, mockprovider.ErrInvalidConfig) {
				t.Errorf("New accepted it: %v", nerr)
			}
		})
	}
}
