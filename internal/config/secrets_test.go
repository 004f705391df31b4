package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// secret is the password every test here hides; none of its parts may show.
const secret = "hunter2"

func TestRedactedHidesSecrets(t *testing.T) {
	path := writeFile(t, "s.yaml", `
queue: {name: sms}
redis: {url: "redis://alice:hunter2@127.0.0.1:6379/0"}
nats: {url: "nats://127.0.0.1:4222", user: bob, password: hunter2}
pacer: {rate: 10}
sink:
  url: "https://carol:hunter2@api.example.com/send?api_key=hunter2&x=1"
  headers: {X-Api-Key: hunter2, Authorization: "Bearer hunter2"}
`)
	c := mustLoad(t, path, nil, nil)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "cfg", c, "nats", c.NATS, "headers", c.Sink.Headers)
	asJSON, err := json.Marshal(c.Sink.Headers)
	if err != nil {
		t.Fatal(err)
	}
	renderings := map[string]string{
		"Redacted()":            c.Redacted(),
		"String()":              c.String(),
		"%v of *Config":         fmt.Sprintf("%v", c),
		"%+v of the nats part":  fmt.Sprintf("%+v", c.NATS),
		"%#v of the nats part":  fmt.Sprintf("%#v", c.NATS),
		"%v of the headers":     fmt.Sprintf("%v", c.Sink.Headers),
		"%s of a secret":        fmt.Sprintf("%s %q %x", c.NATS.Password, c.NATS.Password, c.NATS.Password),
		"slog JSON":             logged.String(),
		"JSON of the headers":   string(asJSON),
		"redis url in Redacted": c.Redacted(),
	}
	for name, text := range renderings {
		if strings.Contains(text, secret) {
			t.Errorf("%s: got the secret in\n%s", name, text)
		}
	}
	r := c.Redacted()
	for _, want := range []string{
		"redis://alice:***@127.0.0.1:6379/0",
		"https://carol:***@api.example.com/send?api_key=***&x=***",
		`password: '***'`,
		`X-Api-Key: '***'`,
		"user: bob",
	} {
		if !strings.Contains(r, want) {
			t.Errorf("Redacted(): got\n%s\nwant it to contain %q", r, want)
		}
	}
	if got := c.NATS.Password.Reveal(); got != secret {
		t.Errorf("Reveal(): got %q, want %q", got, secret)
	}
	if got := c.HTTPSinkConfig().Headers["X-Api-Key"]; got != secret {
		t.Errorf("HTTPSinkConfig().Headers[X-Api-Key]: got %q, want the secret revealed", got)
	}
}

// A user without a password in nats.url is a token (nats://TOKEN@host) and
// is hidden; in redis.url it is only a user name, and shows.
func TestRedactedHidesTheNATSURLToken(t *testing.T) {
	c := mustLoad(t, "", nil, withRequired(map[string]string{
		"nats.url":  "nats://hunter2@127.0.0.1:4222, tls://hunter2@[::1]:4223",
		"redis.url": "redis://alice@127.0.0.1:6379/0",
	}))
	r := c.Redacted()
	if strings.Contains(r, secret) {
		t.Errorf("Redacted(): got the token in\n%s", r)
	}
	for _, want := range []string{"url: nats://***@127.0.0.1:4222,tls://***@[::1]:4223", "url: redis://alice@127.0.0.1:6379/0"} {
		if !strings.Contains(r, want) {
			t.Errorf("Redacted(): got\n%s\nwant it to contain %q", r, want)
		}
	}
}

func TestErrorsDoNotShowSecrets(t *testing.T) {
	tests := []struct {
		name  string
		flags map[string]string
		key   string // the key the error must name
	}{
		{"redis url with a bad escape in the password", map[string]string{"redis.url": "redis://u:hunter2%zz@127.0.0.1:6379"}, "redis.url"},
		{"redis url with a password and a bad port", map[string]string{"redis.url": "redis://u:hunter2@127.0.0.1:port"}, "redis.url"},
		{"redis url with a password and a bad database", map[string]string{"redis.url": "redis://u:hunter2@127.0.0.1:6379/db"}, "redis.url"},
		{"redis url with a password and a bad scheme", map[string]string{"redis.url": "http://u:hunter2@127.0.0.1:6379"}, "redis.url"},
		{"nats url with a bad escape in the password", map[string]string{"nats.url": "nats://u:hunter2%zz@127.0.0.1:4222"}, "nats.url"},
		{"sink url with a bad escape in the password", map[string]string{"sink.url": "https://u:hunter2%zz@h/"}, "sink.url"},
		{"sink url with a key in the query and a bad scheme", map[string]string{"sink.url": "ftp://h/send?key=hunter2"}, "sink.url"},
		{"sink url with a key in the query and a bad host", map[string]string{"sink.url": "https://h h/send?key=hunter2"}, "sink.url"},
		{"nats password with a token", map[string]string{"nats.user": "u", "nats.password": secret, "nats.token": secret}, "nats.token"},
		{"nats password in the url and as a key", map[string]string{"nats.url": "nats://u:hunter2@h:4222", "nats.user": "u", "nats.password": secret}, "nats.user"},
		{"header value with a newline", map[string]string{"sink.headers.X-Api-Key": "hunter2\r\nX: y"}, "sink.headers.X-Api-Key"},
		{"redis password twice", map[string]string{"redis.url": "redis://:hunter2@h:6379", "redis.password_file": "/nonexistent"}, "redis.password_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load("", nil, withRequired(tt.flags))
			keys := problemKeys(t, err)
			if !strings.Contains(strings.Join(keys, " "), tt.key) {
				t.Errorf("got problems about %v, want one about %s; error:\n%v", keys, tt.key, err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "%zz") {
				t.Errorf("got the secret in the error:\n%v", err)
			}
		})
	}
}

func TestSecretOfTheWrongTypeIsNotQuoted(t *testing.T) {
	path := writeFile(t, "s.yaml", "nats: {password: [hunter2]}\nsink: {headers: {X-Api-Key: {v: hunter2}}}\n")
	_, err := Load(path, nil, required())
	keys := problemKeys(t, err)
	if want := "nats.password sink.headers.X-Api-Key"; strings.Join(keys, " ") != want {
		t.Errorf("got problems about %v, want %s", keys, want)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("got the secret in the error:\n%v", err)
	}
}

func TestSecretFilesAreReadAndTrimmed(t *testing.T) {
	redisPW := writeFile(t, "redis-pw", "  s3cret-redis \n")
	natsPW := writeFile(t, "nats-pw", "s3cret-nats\n")
	token := writeFile(t, "token", "\ttok-123\r\n")
	c := mustLoad(t, "", nil, withRequired(map[string]string{
		"redis.password_file": redisPW,
		"nats.user":           "bob",
		"nats.password_file":  natsPW,
	}))
	opts, err := c.RedisOptions()
	if err != nil {
		t.Fatal(err)
	}
	if opts.Password != "s3cret-redis" {
		t.Errorf("redis password: got %q, want %q", opts.Password, "s3cret-redis")
	}
	if got := natsOptionsOf(t, c); got.User != "bob" || got.Password != "s3cret-nats" {
		t.Errorf("nats user, password: got %q, %q, want bob, s3cret-nats", got.User, got.Password)
	}
	c = mustLoad(t, "", nil, withRequired(map[string]string{"nats.token_file": token}))
	if got := natsOptionsOf(t, c); got.Token != "tok-123" {
		t.Errorf("nats token: got %q, want tok-123", got.Token)
	}
	for _, s := range []string{"s3cret", "tok-123"} {
		if strings.Contains(c.Redacted(), s) {
			t.Errorf("Redacted(): got a file's secret %q in\n%s", s, c.Redacted())
		}
	}
}

func TestSecretFileProblems(t *testing.T) {
	empty := writeFile(t, "empty", " \n")
	missing := empty + ".missing"
	tests := []struct {
		flags map[string]string
		key   string
		want  string
	}{
		{map[string]string{"redis.password_file": missing}, "redis.password_file", "no such file"},
		{map[string]string{"redis.password_file": empty}, "redis.password_file", "is empty"},
		{map[string]string{"nats.token_file": missing}, "nats.token_file", "no such file"},
		{map[string]string{"nats.token": "t", "nats.token_file": empty}, "nats.token_file", "nats.token is set too"},
		{map[string]string{"nats.user": "u", "nats.password_file": empty}, "nats.password_file", "is empty"},
		{map[string]string{"nats.creds_file": missing}, "nats.creds_file", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.key+" "+tt.want, func(t *testing.T) {
			_, err := Load("", nil, withRequired(tt.flags))
			keys := problemKeys(t, err)
			if keys[0] != tt.key || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error\n%v\nwant a first line about %s saying %q", err, tt.key, tt.want)
			}
		})
	}
}

// natsOptionsOf applies c's NATS options to nats' defaults.
func natsOptionsOf(t *testing.T, c *Config) nats.Options {
	t.Helper()
	list, err := c.NATSOptions()
	if err != nil {
		t.Fatal(err)
	}
	o := nats.GetDefaultOptions()
	for _, opt := range list {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// The variable sink.auth.secret_env names may be a SLUICE_ one: it is not
// refused as unknown, whichever layer names it, and its value is no key's.
// Another unknown SLUICE_ variable still is.
func TestSecretEnvMayNameASluiceVariable(t *testing.T) {
	file := writeFile(t, "s.yaml", "sink: {auth: {type: bearer, secret_env: SLUICE_SMS_SECRET}}\n")
	secretVar := "SLUICE_SMS_SECRET=" + secret
	byEnv := []string{"SLUICE_SINK_AUTH_TYPE=bearer", "SLUICE_SINK_AUTH_SECRET_ENV=SLUICE_SMS_SECRET"}
	byFlag := map[string]string{"sink.auth.type": "bearer", "sink.auth.secret_env": "SLUICE_SMS_SECRET"}
	for _, tt := range []struct {
		name  string
		path  string
		env   []string
		flags map[string]string
	}{
		{"named in the file", file, []string{secretVar}, nil},
		{"named by the environment", "", append(byEnv, secretVar), nil},
		{"named by a flag", "", []string{secretVar}, byFlag},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, tt.path, tt.env, withRequired(tt.flags))
			if got := c.Sink.Auth.SecretEnv; got != "SLUICE_SMS_SECRET" {
				t.Errorf("sink.auth.secret_env = %q, want SLUICE_SMS_SECRET", got)
			}
			if r := c.Redacted(); strings.Contains(r, secret) {
				t.Errorf("Redacted(): got the secret in\n%s", r)
			}
		})
	}
	for _, tt := range []struct {
		name string
		path string
		env  []string
		want string
	}{
		{"not named", "", []string{secretVar}, "SLUICE_SMS_SECRET"},
		{"another one", file, []string{secretVar, "SLUICE_SMS_SECRETS=x"}, "SLUICE_SMS_SECRETS"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.path, tt.env, required())
			if keys := problemKeys(t, err); !slices.Equal(keys, []string{tt.want}) {
				t.Errorf("got problems about %v, want %s; error:\n%v", keys, tt.want, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("got the secret in the error:\n%v", err)
			}
		})
	}
}
