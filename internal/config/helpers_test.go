package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// required are flags giving the keys that have no default.
func required() map[string]string {
	return map[string]string{
		"queue.name": "sms",
		"pacer.rate": "10",
		"sink.url":   "http://127.0.0.1:8080/send",
	}
}

// withRequired returns required() overridden by extra.
func withRequired(extra map[string]string) map[string]string {
	f := required()
	maps.Copy(f, extra)
	return f
}

// writeFile writes content into a new file in a test directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustLoad loads and fails the test on error.
func mustLoad(t *testing.T, path string, env []string, flags map[string]string) *Config {
	t.Helper()
	c, err := Load(path, env, flags)
	if err != nil {
		t.Fatalf("Load: got error\n%v\nwant none", err)
	}
	return c
}

// problemKeys returns the keys the lines of a Load error name, in order.
func problemKeys(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want one")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("got error %v, want one matching ErrInvalid", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if lines[0] != ErrInvalid.Error()+":" {
		t.Fatalf("got first line %q, want %q", lines[0], ErrInvalid.Error()+":")
	}
	var keys []string
	for _, l := range lines[1:] {
		key, _, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("got line %q, want key: message", l)
		}
		keys = append(keys, key)
	}
	return keys
}

// withoutClocks returns a copy of c without the clocks and the random
// source the packages' SetDefaults fill in: functions, which
// reflect.DeepEqual never finds equal.
func withoutClocks(c *Config) *Config {
	d := *c
	d.Queue.Now, d.Sink.Now, d.Dispatch.Now, d.Dispatch.Rand = nil, nil, nil, nil
	return &d
}
