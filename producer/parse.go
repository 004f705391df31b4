package producer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice/queue"
)

// wireFields are the fields of a job on the wire, in their documented order.
var wireFields = []string{"id", "lane", "user", "key", "not_before", "expires_at", "cost", "request", "payload"}

// queueFields are fields of queue.Job that the queue sets, never a producer.
var queueFields = map[string]bool{"attempt": true, "enqueued_at": true, "last_error": true}

// ParseJob reads one job in its JSON form: an object with the fields id,
// lane, user, key (strings), not_before and expires_at (RFC 3339 times),
// cost (a whole number, at least 1), request (an object with method, url,
// path, query, headers and content_type; see queue.Request) and payload
// (any JSON value but null). Only payload is required; any other field set
// to null is as if absent. Every value must be valid UTF-8: the JSON decoder
// would otherwise replace the bad bytes silently.
//
// It reports every problem found, each a *queue.FieldError naming its
// field, joined with errors.Join and matching queue.ErrInvalidJob: a field
// of the wrong type, a time that is not RFC 3339, a field it does not know
// (named, with the fields it knows), a field given twice. A line that is
// not one JSON object is a FieldError about the field "job". ParseJob does
// not check what depends on the queue (lane names, the payload's size):
// the queue does, at enqueue, or Producer.Check before.
func ParseJob(line []byte) (*queue.Job, error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, &queue.FieldError{Field: "job", Reason: "empty, want a JSON object"}
	}
	fields, err := splitObject(line)
	if err != nil {
		return nil, err
	}
	job := &queue.Job{}
	var errs []error
	payloadSeen := false
	for _, f := range fields {
		payloadSeen = payloadSeen || f.name == "payload"
		if err := setField(job, f.name, f.value); err != nil {
			errs = append(errs, err)
		}
	}
	if !payloadSeen {
		errs = append(errs, &queue.FieldError{Field: "payload", Reason: "required"})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return job, nil
}

// member is one name and value of a JSON object.
type member struct {
	name  string
	value json.RawMessage
}

// splitObject returns the members of the JSON object in line, in order.
func splitObject(line []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(err, dec)
	}
	if tok != json.Delim('{') {
		return nil, &queue.FieldError{Field: "job", Reason: fmt.Sprintf("must be a JSON object, got %s", describe(tok))}
	}
	var ms []member
	seen := map[string]bool{}
	var dups []error
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err, dec)
		}
		name, _ := tok.(string) // a member's name is always a string
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, syntaxError(err, dec)
		}
		if seen[name] {
			dups = append(dups, &queue.FieldError{Field: name, Reason: "given more than once"})
			continue
		}
		seen[name] = true
		ms = append(ms, member{name: name, value: v})
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, syntaxError(err, dec)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &queue.FieldError{Field: "job", Reason: fmt.Sprintf("more after the object, at byte %d", dec.InputOffset())}
	}
	if len(dups) > 0 {
		return nil, errors.Join(dups...)
	}
	return ms, nil
}

// syntaxError describes malformed JSON as a problem of the whole job.
func syntaxError(err error, dec *json.Decoder) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &queue.FieldError{Field: "job", Reason: fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, se.Error())}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &queue.FieldError{Field: "job", Reason: fmt.Sprintf("not valid JSON: ends early, at byte %d", dec.InputOffset())}
	default:
		return &queue.FieldError{Field: "job", Reason: "not valid JSON: " + err.Error()}
	}
}

// describe names the kind of a JSON token.
func describe(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return "null"
	}
}

// setField decodes the value of one member into job. A known field set
// to null keeps its zero value.
func setField(job *queue.Job, name string, v json.RawMessage) error {
	if !utf8.Valid(v) {
		return &queue.FieldError{Field: name, Reason: "not valid UTF-8"}
	}
	if name != "payload" && loneSurrogate(v) { // the payload is sent as written
		return &queue.FieldError{Field: name, Reason: `holds an unpaired UTF-16 surrogate escape (such as \ud800), which is no character: two such values would read the same`}
	}
	if name == "payload" && string(v) == "null" {
		return &queue.FieldError{Field: name, Reason: "must not be null"}
	}
	if string(v) == "null" && slices.Contains(wireFields, name) {
		return nil
	}
	switch name {
	case "id":
		return decodeString(name, v, &job.ID)
	case "lane":
		return decodeString(name, v, &job.Lane)
	case "user":
		return decodeString(name, v, &job.User)
	case "key":
		return decodeString(name, v, &job.Key)
	case "not_before":
		return decodeTime(name, v, &job.NotBefore)
	case "expires_at":
		return decodeTime(name, v, &job.ExpiresAt)
	case "cost":
		if err := json.Unmarshal(v, &job.Cost); err != nil {
			return &queue.FieldError{Field: name, Reason: fmt.Sprintf("must be a whole number, got %s", v)}
		}
		if job.Cost < 1 {
			return &queue.FieldError{Field: name, Reason: fmt.Sprintf("must be at least 1 (leave it out for 1), got %d", job.Cost)}
		}
		return nil
	case "request":
		return decodeRequest(v, job)
	case "payload":
		job.Payload = v
		return nil
	}
	if queueFields[name] {
		return &queue.FieldError{Field: name, Reason: "set by the queue, not by a producer"}
	}
	return &queue.FieldError{Field: name, Reason: "unknown field (known: " + strings.Join(wireFields, ", ") + ")"}
}

// decodeRequest reads the request object, refusing fields it does not know.
func decodeRequest(v json.RawMessage, job *queue.Job) error {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	var r queue.Request
	if err := dec.Decode(&r); err != nil {
		field := "request"
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			field += "." + te.Field
			return &queue.FieldError{Field: field, Reason: fmt.Sprintf("must be %s, got a JSON %s", jsonKind(te.Type.Kind().String()), te.Value)}
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return &queue.FieldError{Field: field, Reason: "unknown field " + name + " (known: method, url, path, query, headers, content_type)"}
		}
		return &queue.FieldError{Field: field, Reason: "must be an object with method, url, path, query, headers and content_type"}
	}
	job.Request = &r
	return nil
}

// jsonKind names a Go kind as the JSON it is decoded from.
func jsonKind(kind string) string {
	switch kind {
	case "map":
		return "an object of strings"
	case "string":
		return "a string"
	}
	return kind
}

func decodeString(name string, v json.RawMessage, dst *string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return &queue.FieldError{Field: name, Reason: fmt.Sprintf("must be a string, got %s", v)}
	}
	return nil
}

func decodeTime(name string, v json.RawMessage, dst *time.Time) error {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return &queue.FieldError{Field: name, Reason: fmt.Sprintf("must be an RFC 3339 time as a string (2026-11-21T10:00:00Z), got %s", v)}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return &queue.FieldError{Field: name, Reason: fmt.Sprintf("must be an RFC 3339 time (2026-11-21T10:00:00Z), got %q", s)}
	}
	*dst = t
	return nil
}

// loneSurrogate reports whether the JSON text v holds a \uXXXX escape of
// a UTF-16 surrogate that is not one half of a pair: encoding/json decodes
// each such escape to U+FFFD, so "otp-\ud800" and "otp-\udbff" would be
// the same key.
func loneSurrogate(v []byte) bool {
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 >= len(v) {
			continue
		}
		if v[i+1] != 'u' {
			i++ // a two-character escape: \\, \", \n...
			continue
		}
		r, ok := hex4(v, i+2)
		i += 5
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r >= 0xdc00: // a low half with no high half before it
			return true
		default: // a high half: a low half must follow
			lo, ok := -1, i+6 < len(v) && v[i+1] == '\\' && v[i+2] == 'u'
			if ok {
				lo, ok = hex4(v, i+3)
			}
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 reads the four hex digits of a \u escape at v[at:].
func hex4(v []byte, at int) (int, bool) {
	if at+4 > len(v) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(v[at:at+4]), 16, 32)
	return int(n), err == nil
}
