package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/sluicehq/sluice/queue"
)

// body encodes j's payload as the request body with the sink's encoding,
// and returns it with its Content-Type.
func (b *Bounds) body(j *queue.Job) ([]byte, string, error) {
	switch b.encoding {
	case EncodingForm:
		v, err := formBody(j.Payload)
		if err != nil {
			return nil, "", &queue.FieldError{Field: "payload", Reason: err.Error()}
		}
		return []byte(v.Encode()), "application/x-www-form-urlencoded", nil
	case EncodingRaw:
		ct := b.rawType
		if j.Request != nil && j.Request.ContentType != "" {
			ct = j.Request.ContentType
		}
		var s string
		if err := json.Unmarshal(j.Payload, &s); err == nil {
			return []byte(s), ct, nil
		}
		return j.Payload, ct, nil
	}
	return j.Payload, "application/json", nil
}

// formBody turns a JSON object into form fields: a string is its text, a
// number its JSON text, a boolean true or false, null the empty string, and
// an array of those one field per element, in order. Anything else (not an
// object, a nested object or array) is an error naming the field.
func formBody(payload json.RawMessage) (url.Values, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errors.New("sink.encoding form needs a JSON object whose fields are strings, numbers, booleans or arrays of them")
	}
	v := url.Values{}
	for k, x := range obj {
		if arr, ok := x.([]any); ok {
			for _, e := range arr {
				s, ok := formValue(e)
				if !ok {
					return nil, fmt.Errorf("field %q: sink.encoding form takes arrays of strings, numbers or booleans only", k)
				}
				v.Add(k, s)
			}
			if len(arr) == 0 {
				v[k] = []string{}
			}
			continue
		}
		s, ok := formValue(x)
		if !ok {
			return nil, fmt.Errorf("field %q: sink.encoding form cannot carry a nested object", k)
		}
		v.Set(k, s)
	}
	return v, nil
}

// formValue renders a JSON scalar as a form value.
func formValue(x any) (string, bool) {
	switch x := x.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case nil:
		return "", true
	}
	return "", false
}

// outOfBounds is the dead-letter reason of a job the sink refuses to send.
func outOfBounds(j *queue.Job, err error) error {
	return fmt.Errorf("%w: job %s is outside the sink's bounds, not sent: %s", ErrPermanent, j.ID,
		strings.ReplaceAll(err.Error(), "\n", "; "))
}
