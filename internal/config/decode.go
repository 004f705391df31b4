package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/v2"

	"github.com/sluicehq/sluice/priority"
)

// decode decodes the merged layers into c with koanf's unmarshalling
// (mapstructure), through the yaml tags, and reports each value it
// refused as a problem about its key, in the file's order. A key set to
// nothing (null in YAML) keeps its zero value.
func (s *schema) decode(k *koanf.Koanf, c *Config, ps *problems) error {
	err := k.UnmarshalWithConf("", c, koanf.UnmarshalConf{Tag: "yaml", DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook:           mapstructure.DecodeHookFuncValue(convert),
		IgnoreUntaggedFields: true,
		MatchName:            func(key, name string) bool { return key == name },
	}})
	var found []*problem
	var other []error
	walkErrors(err, func(err error) {
		var de *mapstructure.DecodeError
		if !errors.As(err, &de) {
			other = append(other, err)
			return
		}
		key := s.fileKey(de.Name())
		msg := de.Unwrap().Error()
		if f := s.byKey[key]; errors.Is(de, errNotMapping) && f != nil && f.isMap() {
			msg += "; from the environment, set one with " + f.envHint()
		}
		found = append(found, problemf(key, "%s", msg))
	})
	slices.SortStableFunc(found, func(a, b *problem) int { return s.index(a.Key) - s.index(b.Key) })
	ps.addAll(found)
	if len(other) > 0 {
		return fmt.Errorf("config: decode: %w", errors.Join(other...))
	}
	return nil
}

// walkErrors calls fn with each *mapstructure.DecodeError in err's tree,
// and with any other error that wraps none.
func walkErrors(err error, fn func(error)) {
	switch x := err.(type) {
	case nil:
	case *mapstructure.DecodeError:
		fn(x)
	case interface{ Unwrap() []error }:
		for _, inner := range x.Unwrap() {
			walkErrors(inner, fn)
		}
	default:
		if inner := errors.Unwrap(err); inner != nil {
			walkErrors(inner, fn)
			return
		}
		fn(err)
	}
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	secretType   = reflect.TypeFor[Secret]()
	laneType     = reflect.TypeFor[priority.Lane]()
	// errNotMapping is a value given where a mapping is wanted.
	errNotMapping = errors.New("must be a mapping of names to values")
)

// convert is the decode hook: it turns a value of a layer (parsed from
// YAML, or text from the environment or a flag) into one of the field's
// kind, or says what the field takes. Text is the zero value when empty
// and a list when comma-separated; a lane is also text, name[:weight]. No
// message quotes a secret, a list or a mapping.
func convert(from, to reflect.Value) (any, error) {
	raw := from.Interface()
	t := to.Type()
	if t == durationType {
		return wrap(toDuration(raw))
	}
	switch t.Kind() {
	case reflect.String:
		return wrap(toString(raw, t == secretType))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return wrap(toInt(raw))
	case reflect.Float32, reflect.Float64:
		return wrap(toFloat(raw))
	case reflect.Bool:
		return wrap(toBool(raw))
	case reflect.Slice:
		return toItems(raw)
	case reflect.Map:
		if m, ok := raw.(map[string]any); ok {
			return emptyAsNil(m), nil
		}
		return nil, errNotMapping
	case reflect.Struct:
		return toMapping(raw, t == laneType)
	}
	return raw, nil
}

// wrap turns a conversion's message into an error.
func wrap[T any](v T, msg string) (any, error) {
	if msg != "" {
		return nil, errors.New(msg)
	}
	return v, nil
}

// emptyAsNil returns nil for an empty mapping, so that it decodes to the
// zero value (a nil map) as an absent key does.
func emptyAsNil(m map[string]any) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// toItems returns raw's items: a YAML list's, or text's split on commas.
// No items is nil: the zero value.
func toItems(raw any) (any, error) {
	switch v := raw.(type) {
	case []any:
		if len(v) == 0 {
			return nil, nil
		}
		return v, nil
	case string:
		var out []any
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		if out == nil {
			return nil, nil
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a list, or text with items separated by commas, got %s", describe(raw))
}

// toMapping checks that raw is a mapping; a lane may also be text
// "name[:weight]".
func toMapping(raw any, lane bool) (any, error) {
	switch v := raw.(type) {
	case map[string]any:
		return v, nil
	case string:
		if lane {
			name, weight, _ := strings.Cut(v, ":")
			return map[string]any{"name": strings.TrimSpace(name), "weight": weight}, nil
		}
	}
	if lane {
		return nil, fmt.Errorf("must be a mapping {name: ..., weight: ...} or text name:weight, got %s", describe(raw))
	}
	return nil, fmt.Errorf("must be a mapping, got %s", describe(raw))
}

func toString(raw any, secret bool) (string, string) {
	switch v := raw.(type) {
	case string:
		return v, ""
	case int, float64, bool:
		return fmt.Sprint(v), ""
	}
	if secret {
		return "", "must be a string"
	}
	return "", fmt.Sprintf("must be a string, got %s", describe(raw))
}

// fromText parses text with parse; empty text is the zero value.
func fromText[T any](raw any, parse func(string) (T, error)) (v T, ok bool) {
	s, isText := raw.(string)
	if s = strings.TrimSpace(s); !isText || s == "" {
		return v, isText
	}
	v, err := parse(s)
	return v, err == nil
}

func toDuration(raw any) (time.Duration, string) {
	if d, ok := fromText(raw, time.ParseDuration); ok {
		return d, ""
	}
	if s, isText := raw.(string); isText {
		return 0, fmt.Sprintf("must be a duration such as 30s, 1m30s or 250ms, got %q", strings.TrimSpace(s))
	}
	if n, ok := raw.(int); ok && n == 0 {
		return 0, ""
	}
	return 0, fmt.Sprintf("must be a duration with a unit, such as 30s, 1m30s or 250ms, got %s", describe(raw))
}

func toInt(raw any) (int, string) {
	switch v := raw.(type) {
	case int:
		return v, ""
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int(v), ""
		}
	}
	if n, ok := fromText(raw, strconv.Atoi); ok {
		return n, ""
	}
	return 0, fmt.Sprintf("must be a whole number, got %s", describe(raw))
}

func toFloat(raw any) (float64, string) {
	switch v := raw.(type) {
	case int:
		return float64(v), ""
	case float64:
		return v, ""
	}
	if x, ok := fromText(raw, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); ok {
		return x, ""
	}
	return 0, fmt.Sprintf("must be a number, got %s", describe(raw))
}

func toBool(raw any) (bool, string) {
	if v, ok := raw.(bool); ok {
		return v, ""
	}
	if b, ok := fromText(raw, strconv.ParseBool); ok {
		return b, ""
	}
	return false, fmt.Sprintf("must be true or false, got %s", describe(raw))
}

// describe shows a refused non-secret value: text quoted, a list or a
// mapping by its kind.
func describe(raw any) string {
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case nil:
		return "nothing"
	}
	return fmt.Sprint(raw)
}
