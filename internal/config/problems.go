package config

import (
	"errors"
	"fmt"
	"strings"
)

// problem is one thing wrong with the configuration, about one key.
type problem struct {
	key string // the key, or the environment variable, it is about
	msg string // what is wrong and what is allowed; never a secret
	err error  // the configured package's own error, when it found it
}

func (p *problem) Error() string { return p.key + ": " + p.msg }

// Unwrap gives the configured package's error, so that its sentinel matches.
func (p *problem) Unwrap() error { return p.err }

// problemf returns a problem about key.
func problemf(key, format string, args ...any) *problem {
	return &problem{key: key, msg: fmt.Sprintf(format, args...)}
}

// problems collects what is wrong, at most one problem per key: the first
// found stands, so that a value refused when decoded is not reported again
// by a Validate that saw its zero value, and a lane checked both by the
// priority and the queue package is reported once.
type problems struct {
	list []error
	seen map[string]bool
}

func (ps *problems) add(p *problem) {
	if ps.seen == nil {
		ps.seen = map[string]bool{}
	}
	if ps.seen[p.key] {
		return
	}
	ps.seen[p.key] = true
	ps.list = append(ps.list, p)
}

func (ps *problems) addf(key, format string, args ...any) { ps.add(problemf(key, format, args...)) }

func (ps *problems) addAll(list []*problem) {
	for _, p := range list {
		ps.add(p)
	}
}

// addChecked adds the problems a package's Validate found. Such an error
// reads "pkg: invalid config: key: what", possibly several joined; the
// sentinel's text is dropped from the line, and kept as the cause. skip
// drops the problems about a key.
func (ps *problems) addChecked(err, sentinel error, skip func(key string) bool) {
	if err == nil {
		return
	}
	list := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		list = joined.Unwrap()
	}
	for _, e := range list {
		text := strings.TrimPrefix(e.Error(), sentinel.Error()+": ")
		key, msg, found := strings.Cut(text, ": ")
		if !found {
			key, msg = "", text
		}
		if skip != nil && skip(key) {
			continue
		}
		ps.add(&problem{key: key, msg: msg, err: e})
	}
}

// err is nil when nothing is wrong, and else every problem in one error
// matching ErrInvalid, one line each.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(ps.list...))
}
