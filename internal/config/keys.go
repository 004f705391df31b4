package config

import (
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/knadh/koanf/v2"

	"github.com/sluicehq/sluice/sink"
)

// field is one key of the file that holds a value: a leaf of Config.
type field struct {
	key   string       // dotted, as in the file: "queue.backoff.min"
	typ   reflect.Type // the field's type
	items []string     // for a list of mappings (queue.lanes): an item's keys
	item  string       // and what an item is, for messages: "a lane"
}

// schema is the set of keys, derived from the yaml tags of Config and of
// the packages' configurations it holds, so that a key a package adds is
// a key of the file, of the environment and of the flags at once.
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
	s.walk(reflect.TypeFor[Config](), "")
	for i := range s.fields {
		f := &s.fields[i]
		s.byKey[f.key] = f
		s.byEnv[envName(f.key)] = f
	}
	return s
}

func (s *schema) walk(t reflect.Type, prefix string) {
	for i := range t.NumField() {
		sf := t.Field(i)
		if squashed(sf) {
			s.walk(sf.Type, prefix)
			continue
		}
		name, ok := yamlName(sf)
		if !ok {
			continue
		}
		key := joinKey(prefix, name)
		s.sections[prefix] = append(s.sections[prefix], name)
		if sf.Type.Kind() == reflect.Struct {
			s.walk(sf.Type, key)
			continue
		}
		f := field{key: key, typ: sf.Type}
		if elem := sf.Type; elem.Kind() == reflect.Slice && elem.Elem().Kind() == reflect.Struct {
			f.items = keysOf(elem.Elem())
			f.item = "a " + strings.ToLower(elem.Elem().Name())
		}
		s.fields = append(s.fields, f)
	}
}

// yamlName returns the key a struct field is decoded from, and false when
// the field is no key: unexported, untagged, tagged "-" or squashed.
func yamlName(sf reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	return name, sf.IsExported() && name != "" && name != "-"
}

// squashed reports whether sf's keys are its parent's (yaml:",squash").
func squashed(sf reflect.StructField) bool {
	_, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	return sf.Type.Kind() == reflect.Struct && slices.Contains(strings.Split(opts, ","), "squash")
}

// keysOf lists the keys of a struct type.
func keysOf(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if name, ok := yamlName(t.Field(i)); ok {
			names = append(names, name)
		}
	}
	return names
}

// index is the position in the file of the key that holds key (itself, or
// the list or mapping key is an item of), for sorting problems.
func (s *schema) index(key string) int {
	for i, f := range s.fields {
		if key == f.key || strings.HasPrefix(key, f.key+".") || strings.HasPrefix(key, f.key+"[") {
			return i
		}
	}
	return len(s.fields)
}

// fileKey turns the decoder's name of a value into its key: an entry of a
// mapping, which the decoder writes sink.headers[X-Api-Key], is
// sink.headers.X-Api-Key; a list's item stays queue.lanes[0].
func (s *schema) fileKey(name string) string {
	for _, f := range s.fields {
		if f.isMap() && strings.HasPrefix(name, f.key+"[") && strings.HasSuffix(name, "]") {
			return f.key + "." + name[len(f.key)+1:len(name)-1]
		}
	}
	return name
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

// checkItems reports the unknown keys of the items of a list of mappings
// (queue.lanes: [{name: vip, wieght: 2}]).
func (s *schema) checkItems(key string, value any) []*problem {
	f, ok := s.byKey[key]
	list, isList := value.([]any)
	if !ok || f.items == nil || !isList {
		return nil
	}
	var ps []*problem
	for i, item := range list {
		m, _ := item.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(f.items, k) {
				ps = append(ps, problemf(fmt.Sprintf("%s[%d].%s", key, i, k), "unknown key; %s has %s", f.item, strings.Join(f.items, ", ")))
			}
		}
	}
	return ps
}

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
// envName it is, or an entry of a mapping key, named by the rest of the
// variable's name (see entryName). It returns "" for a name that matches
// no key.
func (s *schema) envKey(name string) string {
	if f, ok := s.byEnv[name]; ok {
		return f.key
	}
	for _, f := range s.fields {
		prefix := envName(f.key) + "_"
		if f.isMap() && strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			return f.key + "." + f.entryName(name[len(prefix):])
		}
	}
	return ""
}

// headersType is sink.headers's type, whose entries are HTTP headers.
var headersType = reflect.TypeFor[sink.Headers]()

// entryName is the entry of mapping f that the rest of an environment
// variable's name sets. Below sink.headers it is a header, '_' read as
// '-' and canonicalised (X_API_KEY is X-Api-Key). Below any other mapping
// (pacer.tenants.rates, whose names are matched exactly) it is the text as
// written, case and '_' kept: acme is acme, ACME is ACME.
func (f *field) entryName(rest string) string {
	if f.typ == headersType {
		return http.CanonicalHeaderKey(strings.ReplaceAll(rest, "_", "-"))
	}
	return rest
}

// envHint says how to set an entry of mapping f from the environment.
func (f *field) envHint() string {
	env := envName(f.key)
	if f.typ == headersType {
		return fmt.Sprintf("%s_<NAME>, the header's name with '_' for '-' (%s_X_API_KEY sets X-Api-Key)", env, env)
	}
	return fmt.Sprintf("%s_<name>, the name as written, case and '_' kept (%s_acme sets acme, %s_ACME sets ACME)", env, env, env)
}

// namedVariables returns the environment variables that the merged layers
// k name as values of the keys that name one (those ending in _env, as
// sink.auth.secret_env).
func (s *schema) namedVariables(k *koanf.Koanf) map[string]bool {
	named := map[string]bool{}
	for _, f := range s.fields {
		if !strings.HasSuffix(f.key, "_env") {
			continue
		}
		if name, ok := k.Get(f.key).(string); ok && name != "" {
			named[name] = true
		}
	}
	return named
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
