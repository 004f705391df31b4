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

// The admin commands and the producer read neither the provider's secret
// nor the console's token, which an operator's machine need not hold, but
// still check what shapes a job's request; the replica reads both.
func TestClientLoadsReadNoSecretTheyDoNotUse(t *testing.T) {
	path := writeFile(t, "provider.yaml", `
queue: {name: sms}
pacer: {rate: 100}
sink:
  url: https://sms.example.com/send
  encoding: form
  auth: {type: basic, username: AC0123, secret_file: /no/such/sms-gateway}
admin: {token_file: /no/such/admin-token}
`)
	for name, load := range map[string]func(string, []string, map[string]string) (*Config, error){
		"LoadAdmin": LoadAdmin, "LoadProducer": LoadProducer,
	} {
		if _, err := load(path, nil, nil); err != nil {
			t.Errorf("%s without the secret files: %v, want nil", name, err)
		}
		_, err := load(path, []string{"SLUICE_SINK_ENCODING=xml", "SLUICE_SINK_ALLOWED_HOSTS=a/b", "SLUICE_SINK_HEADERS_X_KEY=a\nb"}, nil)
		want := []string{"sink.encoding", "sink.allowed_hosts[0]", "sink.headers.X-Key"}
		if keys := problemKeys(t, err); !slices.Equal(keys, want) {
			t.Errorf("%s with a bad request shape: problems %v, want %v; error:\n%v", name, keys, want, err)
		}
		_, err = load(path, []string{"SLUICE_SINK_TYPE=smtp"}, nil)
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{"sink.type"}) {
			t.Errorf("%s with sink.type smtp: problems %v, want [sink.type]", name, keys)
		}
	}
	_, err := Load(path, nil, nil)
	want := []string{"sink.auth.secret_file", "admin.token_file"}
	if keys := problemKeys(t, err); !slices.Equal(keys, want) {
		t.Errorf("Load without the secret files: problems %v, want %v", keys, want)
	}
}

// serve-api's load needs the queue's keys and its own token, not
// pacer.rate nor sink.url, and reads no secret of the provider's.
func TestLoadAPI(t *testing.T) {
	tok := writeFile(t, "token", "0123456789abcdef0123\n")
	c, err := LoadAPI("", []string{"SLUICE_QUEUE_NAME=sms", "SLUICE_API_TOKEN_FILE=" + tok}, nil)
	if err != nil {
		t.Fatalf("LoadAPI with queue.name and api.token_file: %v, want nil", err)
	}
	if got, err := c.API.Token(); got != "0123456789abcdef0123" || err != nil {
		t.Errorf("API.Token(): got %q, %v", got, err)
	}
	env := []string{"SLUICE_QUEUE_NAME=sms", "SLUICE_API_TOKEN_FILE=" + tok, "SLUICE_SINK_URL=https://h/send",
		"SLUICE_SINK_AUTH_TYPE=bearer", "SLUICE_SINK_AUTH_SECRET_FILE=/no/such/secret", "SLUICE_ADMIN_TOKEN_FILE=/no/such/token"}
	if _, err := LoadAPI("", env, nil); err != nil {
		t.Errorf("LoadAPI without the provider's secret file: %v, want nil", err)
	}
	for _, tt := range []struct {
		env  []string
		want []string
	}{
		{[]string{"SLUICE_QUEUE_NAME=sms"}, []string{"api.token_file"}},
		{[]string{"SLUICE_API_TOKEN_FILE=/no/such/token"}, []string{"queue.name", "api.token_file"}},
		{[]string{"SLUICE_QUEUE_NAME=sms", "SLUICE_API_TOKEN_FILE=" + tok, "SLUICE_API_MAX_BATCH=-1", "SLUICE_PACER_RATE=-1"},
			[]string{"pacer.rate", "api.max_batch"}},
	} {
		_, err := LoadAPI("", tt.env, nil)
		if keys := problemKeys(t, err); !slices.Equal(keys, tt.want) {
			t.Errorf("LoadAPI with %v: problems %v, want %v; error:\n%v", tt.env, keys, tt.want, err)
		}
	}
}

// admin.allowed_hosts lists the names the console answers besides IP
// addresses and localhost, from the file or the environment; a port, a
// scheme or an empty name is refused by its key.
func TestAdminAllowedHosts(t *testing.T) {
	base := []string{"SLUICE_QUEUE_NAME=sms", "SLUICE_PACER_RATE=10", "SLUICE_SINK_URL=http://127.0.0.1:8080/send"}
	c := mustLoad(t, "", append(base, "SLUICE_ADMIN_ALLOWED_HOSTS=sluice.example.com,ops.internal"), nil)
	if want := []string{"sluice.example.com", "ops.internal"}; !slices.Equal(c.Admin.AllowedHosts, want) {
		t.Errorf("admin.allowed_hosts from the environment: got %q, want %q", c.Admin.AllowedHosts, want)
	}
	file := writeFile(t, "sluice.yaml", "admin:\n  allowed_hosts: [sluice.example.com]\n")
	if c := mustLoad(t, file, base, nil); !slices.Equal(c.Admin.AllowedHosts, []string{"sluice.example.com"}) {
		t.Errorf("admin.allowed_hosts from the file: got %q", c.Admin.AllowedHosts)
	}
	for _, bad := range []string{"sluice.example.com:9464", "http://sluice.example.com"} {
		_, err := Load("", append(base, "SLUICE_ADMIN_ALLOWED_HOSTS="+bad), nil)
		if keys := problemKeys(t, err); !slices.Equal(keys, []string{"admin.allowed_hosts"}) {
			t.Errorf("admin.allowed_hosts %q: problems %v; want admin.allowed_hosts", bad, keys)
		}
	}
}
