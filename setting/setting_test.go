package setting_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/setting"
)

var errBad = errors.New("demo: invalid config")

func TestErrorWrapsItsSentinel(t *testing.T) {
	err := fmt.Errorf("demo: new: %w", setting.Errorf(errBad, "demo.rate", "must be positive, got %d", -1))
	if !errors.Is(err, errBad) {
		t.Errorf("errors.Is(%v, errBad): got false, want true", err)
	}
	var e *setting.Error
	if !errors.As(err, &e) || e.Key != "demo.rate" || e.Problem != "must be positive, got -1" {
		t.Fatalf("errors.As: got %+v, want key demo.rate and its problem", e)
	}
	if got, want := err.Error(), "demo: new: demo: invalid config: demo.rate: must be positive, got -1"; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
	if got, want := (&setting.Error{Key: "k", Problem: "p"}).Error(), "k: p"; got != want {
		t.Errorf("Error() without a sentinel: got %q, want %q", got, want)
	}
}

func TestErrorsFindsEveryProblem(t *testing.T) {
	a := setting.Errorf(errBad, "a", "one")
	b := setting.Errorf(errBad, "b", "two")
	c := setting.Errorf(errBad, "c", "three")
	d := setting.Errorf(nil, "d", "four")
	err := errors.Join(a, fmt.Errorf("wrapped: %w", errors.Join(b, errors.New("not a field error"), c)), nil, d)
	got := setting.Errors(err)
	want := []*setting.Error{a, b, c, d}
	if len(got) != len(want) {
		t.Fatalf("got %d problems %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("problem %d: got %v, want %v", i, got[i], want[i])
		}
	}
	if got := setting.Errors(nil); got != nil {
		t.Errorf("Errors(nil): got %v, want nil", got)
	}
}
