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

	"github.com/sluicehq/sluice/priority"
	"go.yaml.in/yaml/v3"
)

// Redacted returns the configuration as YAML, in the file's layout and
// with durations as "30s", that Load reads back to the same values — but
// with every secret replaced by "***": nats.password, nats.token, the
// headers' values, the password in a URL and the query of sink.url. The
// files a key names are shown by name, never read.
func (c *Config) Redacted() string {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(structNode(reflect.ValueOf(c).Elem())); err != nil {
		return fmt.Sprintf("config: render: %v", err) // cannot happen: the nodes are well formed
	}
	_ = enc.Close()
	return b.String()
}

func structNode(v reflect.Value) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || name == "" || name == "-" {
			continue
		}
		n.Content = append(n.Content, str(name), valueNode(v.Field(i), sf.Tag.Get("redact")))
	}
	return n
}

func valueNode(v reflect.Value, redact string) *yaml.Node {
	switch x := v.Interface().(type) {
	case time.Duration:
		return plain(formatDuration(x))
	case Secret:
		return str(x.String())
	case []priority.Lane:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, l := range x {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle,
				Content: []*yaml.Node{str("name"), str(l.Name), str("weight"), plain(strconv.Itoa(l.Weight))}})
		}
		return seq
	case []string:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, s := range x {
			seq.Content = append(seq.Content, str(s))
		}
		return seq
	case map[string]Secret:
		m := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			m.Content = append(m.Content, str(k), str(x[k].String()))
		}
		return m
	case float64:
		return plain(strconv.FormatFloat(x, 'g', -1, 64))
	case int, bool:
		return plain(fmt.Sprint(x))
	}
	if v.Kind() == reflect.Struct {
		return structNode(v)
	}
	s := v.String()
	if strings.HasPrefix(redact, "url") {
		s = redactURLs(s, strings.HasSuffix(redact, ",query"))
	}
	return str(s)
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

// redactURLs hides the passwords of a comma-separated list of URLs, and
// their query's values when query is set. A URL that does not parse is
// shown as "(invalid URL)".
func redactURLs(raw string, query bool) string {
	parts := strings.Split(raw, ",")
	for i, one := range parts {
		u, err := url.Parse(strings.TrimSpace(one))
		if err != nil {
			parts[i] = "(invalid URL)"
			continue
		}
		_, hasPassword := u.User.Password()
		if hasPassword {
			u.User = url.User(u.User.Username())
		}
		if query && u.RawQuery != "" {
			var hidden []string
			for _, k := range slices.Sorted(maps.Keys(u.Query())) {
				hidden = append(hidden, url.QueryEscape(k)+"="+Hidden)
			}
			u.RawQuery = strings.Join(hidden, "&")
		}
		parts[i] = u.String()
		if hasPassword { // url.UserPassword would escape the stars
			parts[i] = strings.Replace(parts[i], "@", ":"+Hidden+"@", 1)
		}
	}
	return strings.Join(parts, ",")
}
