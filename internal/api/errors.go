package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice/queue"
)

// Problem names one field that is wrong and why.
type Problem struct {
	// Field is the JSON path of the field ("cost", "jobs[2].request.url"),
	// or the part of the request ("Authorization", "body", "id", "queue").
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// ErrorBody is every error's answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error: its status, a message and the fields at fault.
type ErrorDetail struct {
	Status  int       `json:"status"`
	Message string    `json:"message"`
	Fields  []Problem `json:"fields"`
}

// writeError answers status with the problems.
func writeError(w http.ResponseWriter, status int, msg string, ps ...Problem) {
	if ps == nil {
		ps = []Problem{}
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Status: status, Message: msg, Fields: ps}})
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"status":500,"message":"encode answer","fields":[]}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// problems lists the *queue.FieldError values err holds, joined or
// wrapped, with prefix before each field; an error with none becomes one
// problem about prefix+fallback ("job", "jobs[2].job"), as a FieldError
// about fallback would be named.
func problems(err error, prefix, fallback string) []Problem {
	var out []Problem
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*queue.FieldError); ok {
			out = append(out, Problem{Field: prefix + fe.Field, Reason: fe.Reason})
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	walk(err)
	if len(out) == 0 && err != nil {
		out = append(out, Problem{Field: prefix + fallback, Reason: err.Error()})
	}
	return out
}

// refused lists what the queue refused of the n jobs of a request (batch:
// sent as {"jobs": [...]}), named as the API's own checks name them: a
// job of a batch of several by its index (queue.JobError), "jobs[2].cost".
// A batch of one is not wrapped: its fields are "jobs[0].<field>".
func refused(err error, batch bool, n int) []Problem {
	switch {
	case !batch:
		return problems(err, "", "job")
	case n == 1:
		return problems(err, "jobs[0].", "job")
	}
	var out []Problem
	for _, e := range joined(err) {
		if je, ok := errors.AsType[*queue.JobError](e); ok {
			out = append(out, problems(je.Err, fmt.Sprintf("jobs[%d].", je.Index), "job")...)
			continue
		}
		out = append(out, Problem{Field: "jobs", Reason: strings.ReplaceAll(e.Error(), "\n", "; ")})
	}
	return out
}

// joined returns the errors that err joins, under any wrapping (one per bad
// job when err is the queue's refusal of a batch), or err itself when it
// joins none.
func joined(err error) []error {
	for e := err; e != nil; {
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			return u.Unwrap()
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		default:
			e = nil
		}
	}
	return []error{err}
}

// isInvalid reports whether err is about a job's content.
func isInvalid(err error) bool { return errors.Is(err, queue.ErrInvalidJob) }
