package api

import (
	"encoding/json"
	"errors"
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
// problem about fallback.
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
		out = append(out, Problem{Field: strings.TrimSuffix(prefix, ".") + fallback, Reason: err.Error()})
	}
	return out
}

// isInvalid reports whether err is about a job's content.
func isInvalid(err error) bool { return errors.Is(err, queue.ErrInvalidJob) }
