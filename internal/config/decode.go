package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/priority"
)

var (
	durationType = reflect.TypeFor[time.Duration]()
	secretType   = reflect.TypeFor[Secret]()
	lanesType    = reflect.TypeFor[[]priority.Lane]()
)

// decode sets dst, a field of type f.typ, from raw: a value parsed from
// YAML, or text from an environment variable or a flag. Text is the zero
// value when empty, a list when comma-separated. Messages never quote a
// secret.
func decode(dst reflect.Value, f *field, raw any) []*problem {
	switch f.typ {
	case durationType:
		d, msg := toDuration(raw)
		return set(dst, reflect.ValueOf(d), f.key, msg)
	case lanesType:
		lanes, ps := toLanes(f.key, raw)
		dst.Set(reflect.ValueOf(lanes))
		return ps
	}
	switch f.typ.Kind() {
	case reflect.String:
		s, msg := toString(raw, f.typ == secretType)
		return set(dst, reflect.ValueOf(s).Convert(f.typ), f.key, msg)
	case reflect.Int:
		n, msg := toInt(raw)
		return set(dst, reflect.ValueOf(n), f.key, msg)
	case reflect.Float64:
		x, msg := toFloat(raw)
		return set(dst, reflect.ValueOf(x), f.key, msg)
	case reflect.Bool:
		b, msg := toBool(raw)
		return set(dst, reflect.ValueOf(b), f.key, msg)
	case reflect.Slice:
		list, ps := toStrings(f.key, raw)
		dst.Set(reflect.ValueOf(list))
		return ps
	case reflect.Map:
		m, ps := toSecrets(f.key, raw)
		dst.Set(reflect.ValueOf(m))
		return ps
	}
	return []*problem{problemf(f.key, "cannot be decoded (type %s)", f.typ)}
}

// set stores v into dst when msg is empty, and else reports msg.
func set(dst, v reflect.Value, key, msg string) []*problem {
	if msg != "" {
		return []*problem{problemf(key, "%s", msg)}
	}
	dst.Set(v)
	return nil
}

// text returns raw's text when raw is a string, trimmed.
func text(raw any) (string, bool) {
	s, ok := raw.(string)
	return strings.TrimSpace(s), ok
}

func toString(raw any, secret bool) (string, string) {
	switch v := raw.(type) {
	case string:
		return v, ""
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v), ""
	}
	if secret {
		return "", "must be a string"
	}
	return "", fmt.Sprintf("must be a string, got %s", describe(raw))
}

func toDuration(raw any) (time.Duration, string) {
	if s, ok := text(raw); ok {
		if s == "" {
			return 0, ""
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Sprintf("must be a duration such as 30s, 1m30s or 250ms, got %q", s)
		}
		return d, ""
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
	case int64:
		if v >= math.MinInt && v <= math.MaxInt {
			return int(v), ""
		}
	case uint64:
		if v <= math.MaxInt {
			return int(v), ""
		}
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int(v), ""
		}
	case string:
		s := strings.TrimSpace(v)
		if s == "" {
			return 0, ""
		}
		if n, err := strconv.Atoi(s); err == nil {
			return n, ""
		}
	}
	return 0, fmt.Sprintf("must be a whole number, got %s", describe(raw))
}

func toFloat(raw any) (float64, string) {
	switch v := raw.(type) {
	case int:
		return float64(v), ""
	case int64:
		return float64(v), ""
	case uint64:
		return float64(v), ""
	case float64:
		return v, ""
	case string:
		s := strings.TrimSpace(v)
		if s == "" {
			return 0, ""
		}
		if x, err := strconv.ParseFloat(s, 64); err == nil {
			return x, ""
		}
	}
	return 0, fmt.Sprintf("must be a number, got %s", describe(raw))
}

func toBool(raw any) (bool, string) {
	switch v := raw.(type) {
	case bool:
		return v, ""
	case string:
		s := strings.TrimSpace(v)
		if s == "" {
			return false, ""
		}
		if b, err := strconv.ParseBool(s); err == nil {
			return b, ""
		}
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

// items returns raw's items: a YAML list's, or text's split on commas
// (empty text is no items).
func items(raw any) ([]any, bool) {
	switch v := raw.(type) {
	case []any:
		return v, true
	case string:
		var out []any
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, true
	}
	return nil, false
}

func toStrings(key string, raw any) ([]string, []*problem) {
	list, ok := items(raw)
	if !ok {
		return nil, []*problem{problemf(key, "must be a list, or text with items separated by commas, got %s", describe(raw))}
	}
	var ps []*problem
	var out []string
	for i, item := range list {
		s, msg := toString(item, false)
		if msg != "" {
			ps = append(ps, problemf(fmt.Sprintf("%s[%d]", key, i), "%s", msg))
			continue
		}
		out = append(out, s)
	}
	return out, ps
}

func toSecrets(key string, raw any) (map[string]Secret, []*problem) {
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, []*problem{problemf(key, "must be a mapping of names to values; from the environment, set one with %s_<NAME>", envName(key))}
	}
	var ps []*problem
	var out map[string]Secret
	if len(m) > 0 {
		out = make(map[string]Secret, len(m))
	}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		s, msg := toString(m[name], true)
		if msg != "" {
			ps = append(ps, problemf(key+"."+name, "%s", msg))
			continue
		}
		out[name] = Secret(s)
	}
	return out, ps
}

// toLanes reads lanes from a YAML list of {name, weight} mappings or of
// "name[:weight]" strings, or from text "vip:8,default:2".
func toLanes(key string, raw any) ([]priority.Lane, []*problem) {
	list, ok := items(raw)
	if !ok {
		return nil, []*problem{problemf(key, "must be a list of {name, weight}, or text such as vip:8,default:2, got %s", describe(raw))}
	}
	var ps []*problem
	lanes := make([]priority.Lane, len(list))
	for i, item := range list {
		at := fmt.Sprintf("%s[%d]", key, i)
		m, ok := item.(map[string]any)
		if !ok {
			s, isText := item.(string)
			if !isText {
				ps = append(ps, problemf(at, "must be a mapping {name: ..., weight: ...} or text name:weight, got %s", describe(item)))
				continue
			}
			name, weight, _ := strings.Cut(s, ":")
			m = map[string]any{"name": strings.TrimSpace(name), "weight": weight}
		}
		ps = append(ps, laneFromMap(at, m, &lanes[i])...)
	}
	return lanes, ps
}

func laneFromMap(at string, m map[string]any, lane *priority.Lane) []*problem {
	var ps []*problem
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var msg string
		switch k {
		case "name":
			lane.Name, msg = toString(m[k], false)
		case "weight":
			lane.Weight, msg = toInt(m[k])
		default:
			msg = "unknown key; a lane has name, weight"
		}
		if msg != "" {
			ps = append(ps, problemf(at+"."+k, "%s", msg))
		}
	}
	return ps
}
