// Package cli holds what sluice's commands share: exit codes carried
// through cobra, flags bound to configuration keys, and the logger the
// --log-level and --log-format flags ask for.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/internal/config"
)

// Exit codes of sluice's commands.
const (
	ExitOK      = 0
	ExitFailure = 1 // a failure at run time (a backend down, a job refused)
	ExitUsage   = 2 // bad usage or configuration
)

// ExitError carries an exit code through cobra.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the error carried.
func (e *ExitError) Unwrap() error { return e.Err }

// Usagef is a bad-usage error: exit code 2.
func Usagef(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Usage marks err as bad usage or configuration: exit code 2.
func Usage(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// Failure marks err as a failure at run time: exit code 1.
func Failure(err error) error { return &ExitError{Code: ExitFailure, Err: err} }

// ExitCode is the exit code for the error a command returned: 0 for nil,
// the code an ExitError carries, else 2 (cobra's own errors are usage).
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitUsage
}

// Key is a configuration key that has a flag of its own.
type Key struct{ Flag, Key, Usage string }

// Flags are the flags every command shares: the configuration file, flags
// bound to configuration keys, and logging.
type Flags struct {
	ConfigPath string
	LogLevel   string
	LogFormat  string
	values     map[string]*string // config key -> flag value
}

// Register adds the shared flags and one flag per key to fs.
func (f *Flags) Register(fs *pflag.FlagSet, keys []Key) {
	fs.StringVarP(&f.ConfigPath, "config", "c", "", "YAML configuration file (configs/sluice.yaml is an example; default $"+config.EnvConfigFile+")")
	fs.StringVar(&f.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.LogFormat, "log-format", "text", "text or json")
	f.values = map[string]*string{}
	for _, k := range keys {
		f.values[k.Key] = fs.String(k.Flag, "", k.Usage)
	}
}

// Overrides returns the configuration keys set by flags.
func (f *Flags) Overrides() map[string]string {
	out := map[string]string{}
	for key, v := range f.values {
		if *v != "" {
			out[key] = *v
		}
	}
	return out
}

// Path is the configuration file: --config, else $SLUICE_CONFIG.
func (f *Flags) Path() string {
	if f.ConfigPath != "" {
		return f.ConfigPath
	}
	return os.Getenv(config.EnvConfigFile)
}

// Logger builds the logger --log-level and --log-format ask for, writing
// to w. Bad values are usage errors naming the flag.
func (f *Flags) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return nil, Usagef("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.LogFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, Usagef("--log-format: must be text or json, got %q", f.LogFormat)
}

// QuietRedis is a go-redis logger that says nothing: the commands report
// Redis failures themselves, once, instead of go-redis' dial retries.
type QuietRedis struct{}

// Printf implements go-redis' internal logger.
func (QuietRedis) Printf(context.Context, string, ...any) {}
