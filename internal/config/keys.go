package config

import (
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// field is one key of the file that holds a value: a leaf of Config.
type field struct {
	key    string       // dotted, as in the file: "queue.backoff.min"
	index  []int        // the field's index path in Config
	typ    reflect.Type // the field's type
	redact string       // the redact tag: "url", "url,query" or ""
}

// schema is the set of keys, derived from Config's yaml tags.
type schema struct {
	fields   []field
	byKey    map[string]*field
	byEnv    map[string]*field // "SLUICE_PACER_RATE" -> pacer.rate
	sections map[string][]string
}

// newSchema lists Config's keys. sections maps each mapping key ("" for the
// top, "queue", "queue.backoff") to the keys it may hold.
func newSchema() *schema {
	s := &schema{byKey: map[string]*field{}, byEnv: map[string]*field{}, sections: map[string][]string{}}
	s.walk(reflect.TypeFor[Config](), "", nil)
	for i := range s.fields {
		f := &s.fields[i]
		s.byKey[f.key] = f
		s.byEnv[envName(f.key)] = f
	}
	return s
}

func (s *schema) walk(t reflect.Type, prefix string, index []int) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || name == "" || name == "-" {
			continue
		}
		key := joinKey(prefix, name)
		s.sections[prefix] = append(s.sections[prefix], name)
		idx := append(slices.Clone(index), i)
		if sf.Type.Kind() == reflect.Struct {
			s.walk(sf.Type, key, idx)
			continue
		}
		s.fields = append(s.fields, field{key: key, index: idx, typ: sf.Type, redact: sf.Tag.Get("redact")})
	}
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// envName is the environment variable of a key.
func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// isMap reports whether f holds a mapping of free keys (sink.headers).
func (f *field) isMap() bool { return f.typ.Kind() == reflect.Map }

// check reports whether key, a flattened key of a layer, is allowed, and
// when not, why. A key below a map field (sink.headers.X-Api-Key) is
// allowed; so is a section that is empty (queue: with nothing under it).
func (s *schema) check(key string, value any) (ok bool, why string) {
	if _, ok := s.byKey[key]; ok {
		return true, ""
	}
	for _, f := range s.fields {
		if f.isMap() && strings.HasPrefix(key, f.key+".") {
			return true, ""
		}
	}
	if names, isSection := s.sections[key]; isSection {
		if value == nil || isEmptyMap(value) {
			return true, ""
		}
		return false, "must be a mapping with the keys " + strings.Join(names, ", ")
	}
	parent := key
	for parent != "" {
		i := strings.LastIndexByte(parent, '.')
		if i < 0 {
			parent = ""
		} else {
			parent = parent[:i]
		}
		if names, ok := s.sections[parent]; ok {
			where := "the top level"
			if parent != "" {
				where = parent
			}
			return false, "unknown key; " + where + " has " + strings.Join(names, ", ")
		}
		if f, ok := s.byKey[parent]; ok {
			return false, "unknown key; " + f.key + " is a single value, not a mapping"
		}
	}
	return false, "unknown key"
}

func isEmptyMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// envKey maps an environment variable's name to its key: the key whose
// envName it is, or a header below sink.headers. It returns "" for a name
// that matches no key.
func (s *schema) envKey(name string) string {
	if f, ok := s.byEnv[name]; ok {
		return f.key
	}
	for _, f := range s.fields {
		prefix := envName(f.key) + "_"
		if f.isMap() && strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			header := strings.ReplaceAll(strings.TrimPrefix(name, prefix), "_", "-")
			return f.key + "." + http.CanonicalHeaderKey(header)
		}
	}
	return ""
}

// nearEnv returns the variable that name misspells by its underscores or
// its case (SLUICE_SINK_MAXINFLIGHT for SLUICE_SINK_MAX_IN_FLIGHT), or "".
func (s *schema) nearEnv(name string) string {
	squash := func(n string) string { return strings.ToUpper(strings.ReplaceAll(n, "_", "")) }
	for _, f := range s.fields {
		if env := envName(f.key); squash(env) == squash(name) {
			return env
		}
	}
	return ""
}
