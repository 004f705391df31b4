package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// Load reads the configuration: the defaults, then the YAML file at path
// (none when path is empty), then the SLUICE_ variables of env (a list of
// "NAME=value", as os.Environ gives; nil reads none), then flags (dotted key
// to value as text). See the package documentation for the rules.
//
// It returns a Config with the defaults filled in and every check passed,
// or an error: one matching fs.ErrNotExist (and others of package os) when
// the file cannot be read, or one matching ErrInvalid that lists every
// problem found, each line naming its key.
func Load(path string, env []string, flags map[string]string) (*Config, error) {
	return load(path, env, flags, forReplica)
}

// LoadProducer is Load for the producer, which sends nothing to the
// provider: pacer.rate and sink.url are not required (they are still
// checked when given), so a producer can be configured with the queue's
// keys alone. Of the sink, it checks only the keys that shape a job's
// request (those sink.NewBounds reads), and it reads neither the
// provider's secret (sink.auth.secret_file) nor admin.token_file, which
// the machine it runs on need not hold.
func LoadProducer(path string, env []string, flags map[string]string) (*Config, error) {
	return load(path, env, flags, forClient)
}

// LoadAPI is Load for serve-api, the HTTP ingest API: as LoadProducer, it
// needs only the queue's and the servers' keys (not pacer.rate nor
// sink.url, and reads no secret of the provider's nor admin.token_file),
// and it also checks the api: keys and reads api.token_file, which is
// required.
func LoadAPI(path string, env []string, flags map[string]string) (*Config, error) {
	return load(path, env, flags, forAPI)
}

func load(path string, env []string, flags map[string]string, m mode) (*Config, error) {
	s := newSchema()
	var ps problems
	k := koanf.New(".")
	if path != "" {
		fk, err := loadFile(path)
		if err != nil {
			return nil, err
		}
		checkKeys(s, fk, &ps)
		if err := k.Merge(fk); err != nil {
			return nil, fmt.Errorf("config: merge %s: %w", path, err)
		}
	}
	unknownEnv, err := loadEnv(s, k, env)
	if err != nil {
		return nil, err
	}
	var flagProblems problems
	for _, key := range slices.Sorted(maps.Keys(flags)) {
		if ok, why := s.check(key, flags[key]); !ok {
			flagProblems.addf(key, "(flag) %s", why)
			continue
		}
		if err := k.Set(key, flags[key]); err != nil {
			return nil, fmt.Errorf("config: flag %s: %w", key, err)
		}
	}
	// Whatever layer names a variable (sink.auth.secret_env), it is known.
	reportUnknownEnv(s, unknownEnv, s.namedVariables(k), &ps)
	ps.addAll(flagProblems.list)
	c := &Config{mode: m}
	// The dispatcher listens to the provider unless told not to: a zero
	// pacer.Config has it off, so the default is set before decoding.
	c.Pacer.Adaptive.Enabled = true
	if err := s.decode(k, c, &ps); err != nil {
		return nil, err
	}
	c.SetDefaults()
	c.validate(&ps)
	if err := ps.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// loadFile parses the YAML file at path into its own layer, so that its
// unknown keys can be told apart from the environment's.
func loadFile(path string) (*koanf.Koanf, error) {
	fk := koanf.New(".")
	err := fk.Load(file.Provider(path), yaml.Parser())
	var pathErr *fs.PathError
	switch {
	case err == nil:
		return fk, nil
	case errors.As(err, &pathErr):
		return nil, fmt.Errorf("config: read configuration file: %w", err)
	default:
		return nil, fmt.Errorf("%w: %s: not valid YAML: %v", ErrInvalid, path, err)
	}
}

// checkKeys reports the keys of a layer that Config does not have, and
// those of the items of its lists.
func checkKeys(s *schema, k *koanf.Koanf, ps *problems) {
	for _, key := range k.Keys() {
		if ok, why := s.check(key, k.Get(key)); !ok {
			ps.addf(key, "%s", why)
		}
		ps.addAll(s.checkItems(key, k.Get(key)))
	}
}

// loadEnv merges the SLUICE_ variables of env into k, mapping each name to
// its key, and returns the names that match no key, sorted.
func loadEnv(s *schema, k *koanf.Koanf, environ []string) ([]string, error) {
	var unknown []string
	p := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: func() []string { return environ },
		TransformFunc: func(name, value string) (string, any) {
			if name == EnvConfigFile {
				return "", nil
			}
			key := s.envKey(name)
			if key == "" {
				unknown = append(unknown, name)
			}
			return key, value
		},
	})
	if err := k.Load(p, nil); err != nil {
		return nil, fmt.Errorf("config: environment: %w", err)
	}
	slices.Sort(unknown)
	return unknown, nil
}

// reportUnknownEnv reports the SLUICE_ variables that match no key, but
// those the configuration names as variables to read (named): a secret
// may well be kept in SLUICE_SMS_SECRET.
func reportUnknownEnv(s *schema, unknown []string, named map[string]bool, ps *problems) {
	for _, name := range unknown {
		switch near := s.nearEnv(name); {
		case named[name]:
		case near != "":
			ps.addf(name, "unknown environment variable; did you mean %s?", near)
		default:
			ps.addf(name, "unknown environment variable: matches no key (a key such as pacer.rate is set by %sPACER_RATE)", EnvPrefix)
		}
	}
}
