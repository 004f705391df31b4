package api

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/setting"
)

// ErrInvalidConfig is wrapped by every problem Config.Validate reports.
var ErrInvalidConfig = errors.New("api: invalid config")

// Defaults applied by SetDefaults.
const (
	DefaultListen       = "127.0.0.1:8480"
	DefaultMaxBodyBytes = 1 << 20
	DefaultMaxBatch     = 1000
	// MinTokenBytes is the shortest token accepted in api.token_file.
	MinTokenBytes = 16
)

// Config is the api: section, read by `dispatcher serve-api`. Zero values
// mean the documented default.
type Config struct {
	// Listen is the host:port the ingest API listens on. Zero means
	// 127.0.0.1:8480 (loopback only); port 0 picks a free port.
	Listen string `yaml:"listen"`
	// TokenFile is a file holding the bearer token clients must send
	// (Authorization: Bearer <token>), at least 16 bytes, surrounding white
	// space trimmed. Required by serve-api.
	TokenFile string `yaml:"token_file"`
	// MaxBodyBytes bounds a request body; a larger one is answered 413.
	// Zero means 1 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxBatch bounds the jobs of one batch. Zero means 1000.
	MaxBatch int `yaml:"max_batch"`
}

// SetDefaults fills the zero fields with their defaults.
func (c *Config) SetDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultMaxBatch
	}
}

// Validate reports every problem of the section, each a *setting.Error
// naming its key ("api.max_batch"), joined. It does not read the token
// file: Token does.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, setting.Errorf(ErrInvalidConfig, "api."+key, format, args...))
	}
	if _, port, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "must be host:port (such as 127.0.0.1:8480), got %q", c.Listen)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		bad("listen", "port must be a number from 0 to 65535, got %q", port)
	}
	if c.MaxBodyBytes < 1024 || c.MaxBodyBytes > 64<<20 {
		bad("max_body_bytes", "must be between 1024 and 64 MiB, got %d", c.MaxBodyBytes)
	}
	if c.MaxBatch < 1 || c.MaxBatch > 100_000 {
		bad("max_batch", "must be between 1 and 100000, got %d", c.MaxBatch)
	}
	return errors.Join(errs...)
}

// Token reads the bearer token from TokenFile. Its errors name the key and
// the file, never the content.
func (c *Config) Token() (string, error) {
	if c.TokenFile == "" {
		return "", setting.Errorf(ErrInvalidConfig, "api.token_file", "required: a file holding the bearer token clients send")
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", setting.Errorf(ErrInvalidConfig, "api.token_file", "%v", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < MinTokenBytes || strings.ContainsAny(tok, " \t\r\n") {
		return "", setting.Errorf(ErrInvalidConfig, "api.token_file", "%s must hold one token of at least %d bytes, without spaces", c.TokenFile, MinTokenBytes)
	}
	return tok, nil
}

// String describes the section without the token.
func (c Config) String() string {
	return fmt.Sprintf("listen %s, token file %s, max body %d bytes, max batch %d", c.Listen, c.TokenFile, c.MaxBodyBytes, c.MaxBatch)
}
