package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve-api refuses to start, exit 2, without a usable token or with bad
// api: keys, naming the key, before it connects to anything.
func TestServeAPIUsageErrors(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--queue", "sms", "--rate", "1", "--sink-url", "http://127.0.0.1:1/", "--redis-url", "redis://127.0.0.1:1/0"}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "api.token_file: required"},
		{map[string]string{"SLUICE_API_TOKEN_FILE": "/no/such/token"}, "api.token_file: open /no/such/token"},
		{map[string]string{"SLUICE_API_TOKEN_FILE": short}, "must hold one token of at least 16 bytes"},
		{map[string]string{"SLUICE_API_LISTEN": "8480"}, "api.listen: must be host:port"},
		{map[string]string{"SLUICE_API_MAX_BATCH": "-1"}, "api.max_batch: must be between 1 and 100000"},
	} {
		t.Run(tt.want, func(t *testing.T) { // each case's environment ends with it
			code, _, stderr := runCmd(t, tt.env, append([]string{"serve-api"}, base...)...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("serve-api with %v: exit %d, stderr %q; want 2 and %q", tt.env, code, stderr, tt.want)
			}
			if strings.Contains(stderr, "abc") {
				t.Errorf("serve-api with %v: the token file's content shows: %q", tt.env, stderr)
			}
		})
	}
}
