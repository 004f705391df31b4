package config

import (
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/sink"
)

// Redacted returns the configuration as YAML, in the file's layout and
// with durations as "30s", that Load reads back to the same values — but
// with every secret replaced by "***": nats.password, nats.token, the
// headers' values, the password in a URL, the token in nats.url
// (nats://TOKEN@host) and the query of sink.url. The files a key names are
// shown by name, never read.
func (c *Config) Redacted() string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(structNode(reflect.ValueOf(c).Elem(), "", nil)); err != nil {
		return fmt.Sprintf("config: render: %v", err) // cannot happen: the nodes are well formed
	}
	_ = enc.Close()
	return b.String()
}

// urlSecrets says what of a URL is secret besides its password.
type urlSecrets struct {
	// query: the query's values (sink.url's API keys).
	query bool
	// token: a user name without a password, which NATS reads as a token
	// (nats://TOKEN@host).
	token bool
}

// urlKeys are the keys holding URLs whose secrets Redacted hides.
var urlKeys = map[string]urlSecrets{"redis.url": {}, "nats.url": {token: true}, "sink.url": {query: true}}

// structNode renders the keys of struct v, under prefix, into n (a new
// mapping when nil): a squashed struct's keys go into its parent's.
func structNode(v reflect.Value, prefix string, n *yaml.Node) *yaml.Node {
	if n == nil {
		n = &yaml.Node{Kind: yaml.MappingNode}
	}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if squashed(sf) {
			structNode(v.Field(i), prefix, n)
			continue
		}
		if name, ok := yamlName(sf); ok {
			n.Content = append(n.Content, str(name), valueNode(v.Field(i), joinKey(prefix, name)))
		}
	}
	return n
}

func valueNode(v reflect.Value, key string) *yaml.Node {
	switch x := v.Interface().(type) {
	case time.Duration:
		return plain(formatDuration(x))
	case Secret:
		return str(x.String())
	case sink.Headers:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			m.Content = append(m.Content, str(k), str(Hidden))
		}
		return m
	}
	switch v.Kind() {
	case reflect.Struct:
		n := structNode(v, key, nil)
		if key != "" && strings.HasSuffix(key, "]") {
			n.Style = yaml.FlowStyle
		}
		return n
	case reflect.Slice:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			item := valueNode(v.Index(i), fmt.Sprintf("%s[%d]", key, i))
			if item.Kind == yaml.ScalarNode {
				seq.Style = yaml.FlowStyle
			}
			seq.Content = append(seq.Content, item)
		}
		if v.Len() == 0 {
			seq.Style = yaml.FlowStyle
		}
		return seq
	case reflect.String:
		s := v.String()
		if secrets, ok := urlKeys[key]; ok {
			s = redactURLs(s, secrets)
		}
		return str(s)
	case reflect.Float32, reflect.Float64:
		return plain(strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.Map: // pacer.tenants.rates
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			m.Content = append(m.Content, str(k.String()), valueNode(v.MapIndex(k), key+"."+k.String()))
		}
		return m
	}
	return plain(fmt.Sprint(v.Interface()))
}

// str is a string scalar, quoted when it would read as another type.
func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// plain is a scalar written as is: a number, a bool, a duration.
func plain(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// formatDuration writes d without zero trailing units: 5m, not 5m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// redactURLs hides the secrets of a comma-separated list of URLs: their
// passwords, their query's values when secrets.query is set, and a user
// name without a password when secrets.token is set. A URL that does not
// parse is shown as "(invalid URL)".
func redactURLs(raw string, secrets urlSecrets) string {
	parts := strings.Split(raw, ",")
	for i, one := range parts {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			parts[i] = "(invalid URL)"
			continue
		}
		_, hasPassword := u.User.Password()
		hideUser := secrets.token && u.User != nil && !hasPassword
		switch {
		case hasPassword:
			u.User = url.User(u.User.Username())
		case hideUser:
			u.User = nil
		}
		if secrets.query && u.RawQuery != "" {
			var hidden []string
			for _, k := range slices.Sorted(maps.Keys(u.Query())) {
				hidden = append(hidden, url.QueryEscape(k)+"="+Hidden)
			}
			u.RawQuery = strings.Join(hidden, "&")
		}
		parts[i] = u.String()
		// Written in by hand: url.User and url.UserPassword would escape
		// the stars.
		switch {
		case hasPassword:
			parts[i] = strings.Replace(parts[i], "@", ":"+Hidden+"@", 1)
		case hideUser:
			parts[i] = strings.Replace(parts[i], "//", "//"+Hidden+"@", 1)
		}
	}
	return strings.Join(parts, ",")
}
