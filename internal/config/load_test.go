package config

import (
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pacer"
	"github.com/sluicehq/sluice/priority"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/sink"
)

func TestDefaults(t *testing.T) {
	c := mustLoad(t, "", nil, required())
	tests := []struct {
		name      string
		got, want any
	}{
		{"queue.backend", c.Queue.Backend, BackendRedis},
		{"queue.lanes", c.Queue.Priority.Lanes, []priority.Lane{{Name: "default", Weight: 1}}},
		{"queue.policy", c.Queue.Priority.Policy, priority.Strict},
		{"queue.visibility_timeout", c.Queue.VisibilityTimeout, 30 * time.Second},
		{"queue.consumer_idle_limit", c.Queue.ConsumerIdleLimit, 5 * time.Minute},
		{"queue.max_attempts", c.Queue.MaxAttempts, 8},
		{"queue.dedup_window", c.Queue.DedupWindow, 10 * time.Minute},
		{"queue.max_payload_bytes", c.Queue.MaxPayloadBytes, 64 << 10},
		{"queue.backoff.min", c.Queue.Backoff.Min, time.Second},
		{"queue.backoff.max", c.Queue.Backoff.Max, 5 * time.Minute},
		{"redis.url", c.Redis.URL, "redis://127.0.0.1:6379/0"},
		{"nats.url", c.NATS.URL, "nats://127.0.0.1:4222"},
		{"pacer.name", c.Pacer.Name, "sms"},
		{"pacer.burst", c.Pacer.Burst, 1},
		{"pacer.horizon", c.Pacer.Horizon, 50 * time.Millisecond},
		{"sink.type", c.Sink.Type, SinkHTTP},
		{"sink.timeout", c.Sink.Timeout, 5 * time.Second},
		{"sink.max_in_flight", c.Sink.MaxInFlight, 256},
		{"metrics.listen", c.Metrics.Listen, "127.0.0.1:9464"},
		{"dispatch.shutdown_timeout", c.ShutdownTimeout(), 10 * time.Second},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if lo, hi := c.Backoff(); lo != time.Second || hi != 5*time.Minute {
		t.Errorf("Backoff(): got %s, %s, want 1s, 5m", lo, hi)
	}
	if addr, ok := c.MetricsAddr(); addr != "127.0.0.1:9464" || !ok {
		t.Errorf("MetricsAddr(): got %q, %v, want 127.0.0.1:9464, true", addr, ok)
	}
}

func TestNoFileNoKeysNamesTheRequiredKeys(t *testing.T) {
	_, err := Load("", nil, nil)
	got := problemKeys(t, err)
	want := []string{"queue.name", "pacer.rate", "sink.url"}
	if !slices.Equal(got, want) {
		t.Errorf("got problems about %v, want %v; error:\n%v", got, want, err)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	path := writeFile(t, "sluice.yaml", `
queue: {name: fromfile, max_attempts: 3, visibility_timeout: 5s}
pacer: {rate: 100, burst: 4}
sink: {url: "http://127.0.0.1:1/file", timeout: 2s}
`)
	env := []string{
		"SLUICE_PACER_RATE=200",
		"SLUICE_QUEUE_MAX_ATTEMPTS=5",
		"SLUICE_SINK_TIMEOUT=3s",
		"HOME=/root", // no prefix: ignored
	}
	flags := map[string]string{"pacer.rate": "300", "sink.timeout": "4s"}
	c := mustLoad(t, path, env, flags)
	tests := []struct {
		key       string
		got, want any
	}{
		{"queue.name (file only)", c.Queue.Name, "fromfile"},
		{"queue.visibility_timeout (file only)", c.Queue.VisibilityTimeout, 5 * time.Second},
		{"pacer.burst (file only)", c.Pacer.Burst, 4},
		{"queue.max_attempts (file, env)", c.Queue.MaxAttempts, 5},
		{"pacer.rate (file, env, flag)", c.Pacer.Rate, 300.0},
		{"sink.timeout (file, env, flag)", c.Sink.Timeout, 4 * time.Second},
		{"sink.url (file only)", c.Sink.URL, "http://127.0.0.1:1/file"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.key, tt.got, tt.want)
		}
	}
}

func TestEnvNamesMapToKeysWithUnderscores(t *testing.T) {
	tests := []struct {
		env  string
		get  func(*Config) any
		want any
	}{
		{"SLUICE_SINK_MAX_IN_FLIGHT=17", func(c *Config) any { return c.Sink.MaxInFlight }, 17},
		{"SLUICE_QUEUE_VISIBILITY_TIMEOUT=45s", func(c *Config) any { return c.Queue.VisibilityTimeout }, 45 * time.Second},
		{"SLUICE_QUEUE_MAX_PAYLOAD_BYTES=1024", func(c *Config) any { return c.Queue.MaxPayloadBytes }, 1024},
		{"SLUICE_QUEUE_BACKOFF_MIN=2s", func(c *Config) any { return c.Queue.Backoff.Min }, 2 * time.Second},
		{"SLUICE_NATS_TLS_INSECURE_SKIP_VERIFY=true", func(c *Config) any { return c.NATS.TLS.InsecureSkipVerify }, true},
		{"SLUICE_DISPATCH_SHUTDOWN_TIMEOUT=1m", func(c *Config) any { return c.Dispatch.ShutdownTimeout }, time.Minute},
		{"SLUICE_PACER_MAX_BATCH=8", func(c *Config) any { return c.Pacer.MaxBatch }, 8},
		{"SLUICE_METRICS_LISTEN=off", func(c *Config) any { return c.Metrics.Listen }, "off"},
		{"SLUICE_SINK_HEADERS_X_API_KEY=k1", func(c *Config) any { return c.Sink.Headers["X-Api-Key"] }, "k1"},
		{"SLUICE_NATS_TOKEN=tok", func(c *Config) any { return c.NATS.Token.Reveal() }, "tok"},
		{"SLUICE_QUEUE_PRIVILEGED_USERS=alice, bob", func(c *Config) any { return c.Queue.Priority.PrivilegedUsers }, []string{"alice", "bob"}},
		{"SLUICE_QUEUE_PRIVILEGED_USERS=", func(c *Config) any { return len(c.Queue.Priority.PrivilegedUsers) }, 0},
		{"SLUICE_QUEUE_LANES=vip:8,default", func(c *Config) any { return c.Queue.Priority.Lanes },
			[]priority.Lane{{Name: "vip", Weight: 8}, {Name: "default", Weight: 1}}},
		{"SLUICE_SINK_MAX_IN_FLIGHT=", func(c *Config) any { return c.Sink.MaxInFlight }, 256}, // empty: zero, the default
		{"SLUICE_CONFIG=/etc/sluice.yaml", func(c *Config) any { return c.Queue.Name }, "sms"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			c := mustLoad(t, "", []string{tt.env}, required())
			if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEveryKeyHasItsOwnEnvName(t *testing.T) {
	s := newSchema()
	if got, want := len(s.byEnv), len(s.fields); got != want {
		t.Errorf("got %d environment names for %d keys, want one each", got, want)
	}
	for _, f := range s.fields {
		if got := s.envKey(envName(f.key)); got != f.key {
			t.Errorf("envKey(%s): got %q, want %q", envName(f.key), got, f.key)
		}
	}
}

func TestListsFromFileAndFlags(t *testing.T) {
	path := writeFile(t, "s.yaml", `
queue:
  lanes: [vip, {name: bulk, weight: 3}, "low:2"]
  privileged_users: [alice, 42]
`)
	c := mustLoad(t, path, nil, withRequired(nil))
	wantLanes := []priority.Lane{{Name: "vip", Weight: 1}, {Name: "bulk", Weight: 3}, {Name: "low", Weight: 2}}
	if !reflect.DeepEqual(c.Queue.Priority.Lanes, wantLanes) {
		t.Errorf("lanes: got %v, want %v", c.Queue.Priority.Lanes, wantLanes)
	}
	if want := []string{"vip", "bulk", "low"}; !slices.Equal(c.QueueConfig().Lanes, want) {
		t.Errorf("QueueConfig().Lanes: got %v, want %v", c.QueueConfig().Lanes, want)
	}
	if want := []string{"alice", "42"}; !slices.Equal(c.Queue.Priority.PrivilegedUsers, want) {
		t.Errorf("privileged_users: got %v, want %v", c.Queue.Priority.PrivilegedUsers, want)
	}
	c = mustLoad(t, path, nil, withRequired(map[string]string{"queue.privileged_users": "carol,dave"}))
	if want := []string{"carol", "dave"}; !slices.Equal(c.Queue.Priority.PrivilegedUsers, want) {
		t.Errorf("privileged_users from a flag: got %v, want %v", c.Queue.Priority.PrivilegedUsers, want)
	}
}

func TestUnknownKeysAreNamed(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		env   []string
		flags map[string]string
		want  []string // the keys named, in order
		hint  string   // a part of the message
	}{
		{"top level", "queus: {name: x}\n", nil, nil, []string{"queus.name"}, "the top level has queue, redis"},
		{"in a section", "pacer: {rate: 5, brust: 2}\n", nil, nil, []string{"pacer.brust"}, "pacer has name, rate, burst"},
		{"nested", "queue: {backoff: {min: 1s, maximum: 2m}}\n", nil, nil, []string{"queue.backoff.maximum"}, "queue.backoff has min, max"},
		{"in a lane", "queue: {lanes: [{name: a, wieght: 2}]}\n", nil, nil, []string{"queue.lanes[0].wieght"}, "a lane has name, weight"},
		{"below a value", "pacer: {rate: {per_second: 5}}\n", nil, nil, []string{"pacer.rate.per_second"}, "pacer.rate is a single value"},
		{"section as a value", "redis: localhost\n", nil, nil, []string{"redis"}, "must be a mapping with the keys url"},
		{"environment", "", []string{"SLUICE_PACER_RATES=5", "SLUICE_QUEUE=x"}, nil, []string{"SLUICE_PACER_RATES", "SLUICE_QUEUE"}, "unknown environment variable"},
		{"environment, misspelt", "", []string{"SLUICE_SINK_MAXINFLIGHT=5"}, nil, []string{"SLUICE_SINK_MAXINFLIGHT"}, "did you mean SLUICE_SINK_MAX_IN_FLIGHT?"},
		{"flag", "", nil, map[string]string{"pacer.ratee": "5"}, []string{"pacer.ratee"}, "(flag) unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, "s.yaml", tt.file)
			}
			_, err := Load(path, tt.env, withRequired(tt.flags))
			got := problemKeys(t, err)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got problems about %v, want %v; error:\n%v", got, tt.want, err)
			}
			if !strings.Contains(err.Error(), tt.hint) {
				t.Errorf("got error\n%v\nwant it to say %q", err, tt.hint)
			}
		})
	}
}

func TestEmptySectionsAndNullValuesAreAllowed(t *testing.T) {
	path := writeFile(t, "s.yaml", "queue:\n  name: sms\n  lanes:\nredis:\nnats: {}\npacer: {rate: 5}\nsink: {url: 'http://h/'}\n")
	c := mustLoad(t, path, nil, nil)
	if got, want := c.Queue.Priority.Lanes, []priority.Lane{{Name: "default", Weight: 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("lanes: got %v, want %v", got, want)
	}
}

func TestEveryProblemIsReportedAtOnce(t *testing.T) {
	path := writeFile(t, "s.yaml", `
queue:
  name: "no spaces"
  backend: kafka
  lanes: [{name: vip, weight: -1}, {name: vip}]
  policy: random
  visibility_timeout: 30
  backoff: {min: 1m, max: 10s}
redis: {url: "http://127.0.0.1:6379"}
nats: {url: "nats://127.0.0.1:4222", user: bob}
pacer: {rate: -5, burst: many}
sink: {type: http, url: "ftp://x", timeout: -1s, max_in_flight: 0, headers: {Idempotency-Key: x}}
metrics: {listen: "9464"}
dispatch: {shutdown_timeout: -1s}
`)
	_, err := Load(path, nil, nil)
	got := problemKeys(t, err)
	want := []string{
		"queue.visibility_timeout", // decoding
		"pacer.burst",
		"queue.backend", // checks, by section
		"queue.lanes[0].weight",
		"queue.lanes[1].name",
		"queue.policy",
		"queue.name",
		"queue.backoff.max",
		"redis.url",
		"nats.password",
		"pacer.rate",
		"sink.url",
		"sink.timeout",
		"sink.headers.Idempotency-Key",
		"metrics.listen",
		"dispatch.shutdown_timeout",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got problems about\n%v\nwant\n%v\nerror:\n%v", got, want, err)
	}
	for _, sentinel := range []error{queue.ErrInvalidConfig, priority.ErrInvalidConfig, pacer.ErrInvalidConfig, sink.ErrInvalidConfig} {
		if !errors.Is(err, sentinel) {
			t.Errorf("got error not matching %v, want it to", sentinel)
		}
	}
	for _, bad := range []string{"queue: invalid config", "pacer: invalid config"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("got error repeating the sentinel %q in a line, want only key: message lines:\n%v", bad, err)
		}
	}
}

func TestBadValueTypes(t *testing.T) {
	tests := []struct {
		flag, value, want string
	}{
		{"pacer.rate", "fast", `pacer.rate: must be a number, got "fast"`},
		{"queue.max_attempts", "2.5", `queue.max_attempts: must be a whole number, got "2.5"`},
		{"sink.timeout", "5", `sink.timeout: must be a duration such as 30s, 1m30s or 250ms, got "5"`},
		{"redis.tls.insecure_skip_verify", "maybe", `redis.tls.insecure_skip_verify: must be true or false, got "maybe"`},
		{"queue.lanes", "vip:lots", `queue.lanes[0].weight: must be a whole number, got "lots"`},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			_, err := Load("", nil, withRequired(map[string]string{tt.flag: tt.value}))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error\n%v\nwant a line %q", err, tt.want)
			}
			if keys := problemKeys(t, err); len(keys) != 1 {
				t.Errorf("got problems about %v, want one", keys)
			}
		})
	}
}

func TestMissingAndMalformedFiles(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := Load(missing, nil, nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: got %v, want an error matching fs.ErrNotExist naming %s", err, missing)
	}
	bad := writeFile(t, "bad.yaml", "queue: {name: x\n")
	_, err = Load(bad, nil, nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
		t.Errorf("malformed file: got %v, want an error matching ErrInvalid naming %s", err, bad)
	}
	dup := writeFile(t, "dup.yaml", "pacer: {rate: 1}\npacer: {rate: 2}\n")
	if _, err = Load(dup, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("duplicate key: got %v, want an error matching ErrInvalid", err)
	}
}

func TestShippedConfigsValidate(t *testing.T) {
	paths, err := filepath.Glob("../../configs/*.yaml")
	if err != nil || len(paths) < 2 {
		t.Fatalf("got configs %v (%v), want at least sluice.yaml and sluice-nats.yaml", paths, err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			c := mustLoad(t, path, nil, nil)
			if c.Queue.Name == "" || c.Pacer.Rate <= 0 {
				t.Errorf("got queue.name %q, pacer.rate %v, want both set", c.Queue.Name, c.Pacer.Rate)
			}
		})
	}
}

func TestShippedConfigMatchesTheDesign(t *testing.T) {
	c := mustLoad(t, "../../configs/sluice.yaml", nil, nil)
	want := priority.Config{
		Lanes:           []priority.Lane{{Name: "vip", Weight: 8}, {Name: "default", Weight: 2}},
		Policy:          priority.Strict,
		PrivilegedUsers: []string{"alice"},
	}
	if got := c.PriorityConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("PriorityConfig(): got %+v, want %+v", got, want)
	}
	if got, want := c.Redis.URL, "redis://127.0.0.1:6379/0"; got != want {
		t.Errorf("redis.url: got %q, want %q", got, want)
	}
	if got, want := c.Sink.URL, "http://127.0.0.1:8080/send"; got != want {
		t.Errorf("sink.url: got %q, want %q", got, want)
	}
	n := mustLoad(t, "../../configs/sluice-nats.yaml", nil, nil)
	if n.Queue.Backend != BackendNATS {
		t.Errorf("sluice-nats.yaml queue.backend: got %q, want nats", n.Queue.Backend)
	}
}

func TestSectionConfigs(t *testing.T) {
	path := writeFile(t, "s.yaml", `
queue:
  name: sms
  lanes: [{name: vip, weight: 8}, {name: default, weight: 2}]
  policy: weighted
  privileged_users: [alice]
  visibility_timeout: 20s
  max_attempts: 4
  dedup_window: 1h
  max_payload_bytes: 1000
pacer: {name: provider-a, rate: 250.5, burst: 3, horizon: 20ms}
sink: {url: "https://api.example.com/send", timeout: 2s, max_in_flight: 9, headers: {X-Api-Key: k}}
`)
	c := mustLoad(t, path, nil, nil)
	wantQ := queue.Config{Name: "sms", Lanes: []string{"vip", "default"}, VisibilityTimeout: 20 * time.Second,
		ConsumerIdleLimit: 5 * time.Minute, MaxAttempts: 4, DedupWindow: time.Hour, MaxPayloadBytes: 1000, MaxCost: queue.DefaultMaxCost}
	gotQ := c.QueueConfig()
	if gotQ.Now == nil {
		t.Error("QueueConfig().Now: got nil, want the queue's default clock")
	}
	if gotQ.Now = nil; !reflect.DeepEqual(gotQ, wantQ) {
		t.Errorf("QueueConfig(): got %+v, want %+v", gotQ, wantQ)
	}
	// The pacer's own defaults, applied by its SetDefaults.
	wantP := pacer.Config{Name: "provider-a", Rate: 250.5, Burst: 3, Horizon: 20 * time.Millisecond,
		Adaptive: pacer.Adaptive{Enabled: true}} // the dispatcher's default
	wantP.SetDefaults()
	if wantP.MaxBatch != pacer.DefaultMaxBatch || wantP.MaxLateness != pacer.DefaultMaxLateness || wantP.Headroom <= 0 {
		t.Fatalf("pacer.Config.SetDefaults: got %+v, want the documented defaults", wantP)
	}
	if got := c.PacerConfig(); !reflect.DeepEqual(got, wantP) {
		t.Errorf("PacerConfig(): got %+v, want %+v", got, wantP)
	}
	wantS := sink.HTTPConfig{URL: "https://api.example.com/send", Method: "POST", Encoding: sink.EncodingJSON, Timeout: 2 * time.Second, MaxInFlight: 9,
		Headers: sink.Headers{"X-Api-Key": "k"}}
	gotS := c.HTTPSinkConfig()
	if gotS.Now == nil {
		t.Error("HTTPSinkConfig().Now: got nil, want the sink's default clock")
	}
	if gotS.Now = nil; !reflect.DeepEqual(gotS, wantS) {
		t.Errorf("HTTPSinkConfig(): got %+v, want %+v", gotS, wantS)
	}
	if got := c.PriorityConfig().Policy; got != priority.Weighted {
		t.Errorf("PriorityConfig().Policy: got %q, want weighted", got)
	}
}

func TestMetricsOffAndSinkLog(t *testing.T) {
	c := mustLoad(t, "", []string{"SLUICE_METRICS_LISTEN=off", "SLUICE_SINK_TYPE=log"},
		map[string]string{"queue.name": "sms", "pacer.rate": "1"})
	if addr, ok := c.MetricsAddr(); ok || addr != "" {
		t.Errorf("MetricsAddr(): got %q, %v, want \"\", false", addr, ok)
	}
	if c.Sink.Type != SinkLog {
		t.Errorf("sink.type: got %q, want log", c.Sink.Type)
	}
	path := writeFile(t, "s.yaml", "metrics: {listen: off}\n") // YAML 1.1 would read off as false
	c = mustLoad(t, path, nil, required())
	if _, ok := c.MetricsAddr(); ok {
		t.Errorf("metrics.listen: off in YAML: got listening on %q, want off", c.Metrics.Listen)
	}
}

func TestRedactedReadsBackToTheSameConfig(t *testing.T) {
	c := mustLoad(t, "../../configs/sluice.yaml", nil, nil)
	path := writeFile(t, "again.yaml", c.Redacted())
	again := mustLoad(t, path, nil, nil)
	if !reflect.DeepEqual(withoutClocks(c), withoutClocks(again)) {
		t.Errorf("got\n%s\nafter a round trip, want\n%s", again.Redacted(), c.Redacted())
	}
}

func TestLoadDoesNotReadTheProcessEnvironment(t *testing.T) {
	t.Setenv("SLUICE_PACER_RATE", "999")
	c := mustLoad(t, "", nil, required())
	if c.Pacer.Rate != 10 {
		t.Errorf("pacer.rate: got %v, want 10 (the process environment is passed in, not read)", c.Pacer.Rate)
	}
}

func TestHandBuiltConfigValidates(t *testing.T) {
	c := &Config{Queue: Queue{Config: queue.Config{Name: "demo"}}, Pacer: pacer.Config{Rate: 50}, Sink: Sink{Type: SinkLog}}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("Validate(): got %v, want nil", err)
	}
	c.Pacer.Rate = -1
	if keys := problemKeys(t, c.Validate()); !slices.Equal(keys, []string{"pacer.rate"}) {
		t.Errorf("Validate() with a negative rate: got problems about %v, want [pacer.rate]", keys)
	}
}

// The producer needs only the queue's keys; the dispatcher's keys are
// still checked when given.
func TestLoadProducer(t *testing.T) {
	flags := map[string]string{"queue.name": "sms"}
	if _, err := LoadProducer("", nil, flags); err != nil {
		t.Errorf("LoadProducer with queue.name only: %v, want nil", err)
	}
	if _, err := Load("", nil, flags); err == nil || !strings.Contains(err.Error(), "pacer.rate") || !strings.Contains(err.Error(), "sink.url") {
		t.Errorf("Load with queue.name only: %v, want pacer.rate and sink.url required", err)
	}
	flags["pacer.rate"] = "-1"
	flags["sink.url"] = "ftp://x"
	_, err := LoadProducer("", nil, flags)
	if err == nil || !strings.Contains(err.Error(), "pacer.rate") || !strings.Contains(err.Error(), "sink.url") {
		t.Errorf("LoadProducer with a bad rate and sink url: %v, want both named", err)
	}
}
