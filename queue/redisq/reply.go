package redisq

import (
	"errors"
	"fmt"
	"strconv"
)

// errReply is wrapped by every error about a reply of unexpected shape.
var errReply = errors.New("redisq: unexpected reply")

// reply reads a script's reply: a flat array of integers and strings. Every
// accessor checks the type and records the first problem in err instead of
// panicking; callers check err once at the end.
type reply struct {
	vals []any
	err  error
}

// newReply checks that v is an array whose length is head plus a multiple
// of stride.
func newReply(v any, head, stride int) *reply {
	vals, ok := v.([]any)
	if !ok {
		return &reply{err: fmt.Errorf("%w: got %T, want an array", errReply, v)}
	}
	if len(vals) < head || (len(vals)-head)%stride != 0 {
		return &reply{vals: vals, err: fmt.Errorf("%w: array of %d values, want %d plus a multiple of %d",
			errReply, len(vals), head, stride)}
	}
	return &reply{vals: vals}
}

// len is the number of values in the reply.
func (r *reply) len() int { return len(r.vals) }

// int returns value i as an integer (an integer reply or a decimal string).
func (r *reply) int(i int) int64 {
	if r.err != nil {
		return 0
	}
	switch v := r.vals[i].(type) {
	case int64:
		return v
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			r.err = fmt.Errorf("%w: value %d: %q is not an integer", errReply, i, v)
		}
		return n
	default:
		r.err = fmt.Errorf("%w: value %d: got %T, want an integer", errReply, i, v)
		return 0
	}
}

// str returns value i as a string.
func (r *reply) str(i int) string {
	if r.err != nil {
		return ""
	}
	s, ok := r.vals[i].(string)
	if !ok {
		r.err = fmt.Errorf("%w: value %d: got %T, want a string", errReply, i, r.vals[i])
	}
	return s
}

// settled reads the 1/0 reply of a settle script.
func settled(v any) (bool, error) {
	n, ok := v.(int64)
	if !ok || (n != 0 && n != 1) {
		return false, fmt.Errorf("%w: got %v (%T), want 0 or 1", errReply, v, v)
	}
	return n == 1, nil
}
