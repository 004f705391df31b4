package sink

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/setting"
)

// AuthType names how the sink authenticates to the provider.
type AuthType string

// The authentication types.
const (
	AuthNone   AuthType = "none"   // no Authorization header (the zero value too)
	AuthBasic  AuthType = "basic"  // Authorization: Basic base64(username:secret)
	AuthBearer AuthType = "bearer" // Authorization: Bearer secret
)

// Auth is the sink.auth section: the Authorization header sent with every
// request. The secret is read once, when the sink is built, from a file or
// an environment variable, and never appears in errors, logs or the
// printed configuration (which shows the file's path or the variable's
// name only).
type Auth struct {
	// Type is none, basic or bearer. Zero means none.
	Type AuthType `yaml:"type"`
	// Username is the basic authentication user. Required with basic.
	Username string `yaml:"username"`
	// SecretFile is a file holding the password (basic) or the token
	// (bearer), surrounding white space trimmed. One of SecretFile and
	// SecretEnv is required with basic and bearer.
	SecretFile string `yaml:"secret_file"`
	// SecretEnv is the environment variable holding the secret.
	SecretEnv string `yaml:"secret_env"`
	// LookupEnv reads an environment variable. Zero means os.LookupEnv.
	LookupEnv func(string) (string, bool) `yaml:"-"`
}

// maxSecretBytes bounds a secret file.
const maxSecretBytes = 64 << 10

// validate checks the section, reading the secret file (as the Redis and
// NATS password files are read) to check that it is there; the secret
// variable is read when the sink is built (NewHTTP), so that the
// configuration can be checked and printed on a machine without it. c is
// the whole configuration, for the conflict with sink.url's credentials.
func (a *Auth) validate(c *HTTPConfig) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "sink.auth."+key, format, args...))
	}
	switch a.Type {
	case "", AuthNone:
		if a.Username != "" || a.SecretFile != "" || a.SecretEnv != "" {
			bad("type", "required (basic or bearer) with username, secret_file or secret_env")
		}
		return errs
	case AuthBasic:
		if a.Username == "" {
			bad("username", "required with type basic")
		}
		if strings.Contains(a.Username, ":") {
			bad("username", "must not contain ':'")
		}
	case AuthBearer:
		if a.Username != "" {
			bad("username", "only with type basic")
		}
	default:
		bad("type", "must be none, basic or bearer, got %q", a.Type)
		return errs
	}
	if e, err := parseEndpoint(c.URL); err == nil && e.user != nil {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "sink.url", "has credentials, and sink.auth is set: keep one"))
	}
	switch {
	case a.SecretFile != "" && a.SecretEnv != "":
		bad("secret_file", "give secret_file or secret_env, not both")
	case a.SecretFile != "":
		if _, err := readSecret(a.SecretFile); err != nil {
			bad("secret_file", "%v", err)
		}
	case a.SecretEnv == "":
		bad("secret_file", "required with type %s: secret_file or secret_env", a.Type)
	}
	return errs
}

// secret reads the secret. Its errors name the file or the variable,
// never the content.
func (a *Auth) secret() (string, error) {
	switch {
	case a.SecretFile != "" && a.SecretEnv != "":
		return "", errors.New("give secret_file or secret_env, not both")
	case a.SecretFile != "":
		return readSecret(a.SecretFile)
	case a.SecretEnv != "":
		lookup := a.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(a.SecretEnv)
		v = strings.TrimSpace(v)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set or empty", a.SecretEnv)
		}
		return v, nil
	}
	return "", fmt.Errorf("required with type %s: secret_file or secret_env", a.Type)
}

// secretKey is the key the secret comes from, for messages.
func (a *Auth) secretKey() string {
	if a.SecretFile == "" && a.SecretEnv != "" {
		return "sink.auth.secret_env"
	}
	return "sink.auth.secret_file"
}

// readSecret reads a secret file, trimmed; it refuses an empty one and
// one over 64 KiB.
func readSecret(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxSecretBytes)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	if strings.ContainsAny(s, "\r\n\x00") {
		return "", fmt.Errorf("%s holds more than one line", path)
	}
	return s, nil
}

// header returns the Authorization header's value, "" for none.
func (a *Auth) header() (string, error) {
	switch a.Type {
	case AuthBasic:
		s, err := a.secret()
		if err != nil {
			return "", err
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(a.Username+":"+s)), nil
	case AuthBearer:
		s, err := a.secret()
		if err != nil {
			return "", err
		}
		return "Bearer " + s, nil
	}
	return "", nil
}
