package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Bad flags and a bad backend stop the demo before it starts anything,
// with an error naming what was wrong. (internal/demo runs whole demos.)
func TestBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--no-such-flag"}, 2, "unknown flag"},
		{[]string{"extra"}, 2, "unknown command"},
		{[]string{"--log-level", "loud"}, 2, "--log-level"},
		{[]string{"--jobs", "many"}, 2, "--jobs"},
		{[]string{"--backend", "kafka"}, 2, "--backend: must be redis or nats"},
		{[]string{"--jobs", "-1"}, 2, "--jobs: must be between 1 and 1000000, got -1"},
		{[]string{"--jobs", "2000000"}, 2, "--jobs: must be between 1 and 1000000"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tt.args, &out, &errb)
		if code != tt.code || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("demo %v: exit %d, stderr %q; want %d and %q", tt.args, code, errb.String(), tt.code, tt.want)
		}
	}
}
