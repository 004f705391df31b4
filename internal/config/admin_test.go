package config

import (
	"slices"
	"strings"
	"testing"
)

// admin.token_file is read at load; a missing or empty file is named; the
// admin commands' load needs neither pacer.rate nor sink.url.
func TestAdminTokenFile(t *testing.T) {
	base := []string{"SLUICE_QUEUE_NAME=sms", "SLUICE_PACER_RATE=10", "SLUICE_SINK_URL=http://127.0.0.1:8080/send"}
	tok := writeFile(t, "token", "  s3cret\n")
	c := mustLoad(t, "", append(base, "SLUICE_ADMIN_TOKEN_FILE="+tok), nil)
	if got, err := c.AdminToken(); got != "s3cret" || err != nil {
		t.Errorf("AdminToken(): got %q, %v; want s3cret", got, err)
	}
	if strings.Contains(c.Redacted(), "s3cret") {
		t.Error("Redacted shows the token")
	}
	if got, err := mustLoad(t, "", base, nil).AdminToken(); got != "" || err != nil {
		t.Errorf("AdminToken() without the key: got %q, %v; want none", got, err)
	}
	for _, path := range []string{"/no/such/token", writeFile(t, "empty", "\n")} {
		_, err := Load("", append(base, "SLUICE_ADMIN_TOKEN_FILE="+path), nil)
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{"admin.token_file"}) {
			t.Errorf("token file %s: problems %v; want admin.token_file", path, keys)
		}
	}
	if _, err := LoadAdmin("", []string{"SLUICE_QUEUE_NAME=sms"}, nil); err != nil {
		t.Errorf("LoadAdmin with queue.name alone: %v", err)
	}
}
