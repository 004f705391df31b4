// Package setting holds what every configurable sluice package shares: the
// error that names the configuration key at fault.
//
// A component's Config.Validate reports each problem as an *Error naming
// the key as it is written in the YAML file ("pacer.rate",
// "queue.lanes[1].weight") and wrapping the component's own sentinel
// (pacer.ErrInvalidConfig, ...), every problem joined with errors.Join.
// A caller finds one with errors.As and all of them with Errors, and never
// needs to parse an error's text.
package setting

import (
	"errors"
	"fmt"
)

// Error is one problem of a configuration, about one key.
type Error struct {
	// Key is the key as written in the configuration file: dotted, with
	// list items indexed ("queue.lanes[1].name").
	Key string
	// Problem says what is wrong and what is allowed. It never quotes a
	// secret.
	Problem string
	// Err is the sentinel of the package whose check failed
	// (pacer.ErrInvalidConfig, ...); nil when there is none.
	Err error
}

// Errorf returns the problem of key, wrapping sentinel.
func Errorf(sentinel error, key, format string, args ...any) *Error {
	return &Error{Key: key, Problem: fmt.Sprintf(format, args...), Err: sentinel}
}

// Error reads "sentinel: key: problem", or "key: problem" without a
// sentinel.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Key + ": " + e.Problem
	}
	return e.Err.Error() + ": " + e.Key + ": " + e.Problem
}

// Unwrap returns the sentinel, so that errors.Is matches it.
func (e *Error) Unwrap() error { return e.Err }

// Errors returns every *Error in err's tree (through errors.Join and %w
// wrapping), in order. It does not look inside an *Error.
func Errors(err error) []*Error {
	var out []*Error
	var walk func(error)
	walk = func(err error) {
		switch x := err.(type) {
		case nil:
		case *Error:
			out = append(out, x)
		case interface{ Unwrap() []error }:
			for _, inner := range x.Unwrap() {
				walk(inner)
			}
		default:
			walk(errors.Unwrap(err))
		}
	}
	walk(err)
	return out
}
