package cli

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0}, {Failure(errors.New("down")), 1}, {Usagef("--x: bad"), 2}, {errors.New("cobra"), 2},
	} {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestFlags(t *testing.T) {
	var f Flags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	f.Register(fs, []Key{{"rate", "pacer.rate", "rate"}, {"queue", "queue.name", "name"}})
	if err := fs.Parse([]string{"--rate", "250", "--log-format", "xml"}); err != nil {
		t.Fatal(err)
	}
	if got := f.Overrides(); len(got) != 1 || got["pacer.rate"] != "250" {
		t.Errorf("Overrides() = %v, want pacer.rate=250 only", got)
	}
	if _, err := f.Logger(io.Discard); ExitCode(err) != 2 || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("Logger with --log-format xml: %v, want a usage error naming the flag", err)
	}
	t.Setenv("SLUICE_CONFIG", "/etc/sluice.yaml")
	if f.Path() != "/etc/sluice.yaml" {
		t.Errorf("Path() = %q, want $SLUICE_CONFIG", f.Path())
	}
}
