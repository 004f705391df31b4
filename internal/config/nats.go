package config

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// natsDialTimeout bounds one attempt to reach one NATS server.
const natsDialTimeout = 5 * time.Second

// NATS is the nats: section: the queue's store when the backend is nats.
// At most one way to authenticate: user and password (in the URL or as
// keys), a token, or a credentials file.
type NATS struct {
	// URL is nats://host:port (tls://, ws://, wss:// too), or several
	// separated by commas. Zero means nats://127.0.0.1:4222. Passwords and
	// tokens in it (nats://user:password@host, nats://TOKEN@host) are
	// hidden from Redacted and from errors.
	URL string `yaml:"url"`
	// User and Password authenticate with a user name and password; the
	// password may come from PasswordFile instead. Optional.
	User         string `yaml:"user"`
	Password     Secret `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	// Token authenticates with a token, or TokenFile names a file holding
	// it. Optional.
	Token     Secret `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	// CredsFile is a NATS credentials file (user JWT and NKey seed).
	// Optional.
	CredsFile string `yaml:"creds_file"`
	// TLS configures TLS; setting any of it requires TLS of the server.
	TLS TLS `yaml:"tls"`
	// Replicas is the replica count of the streams and consumers the
	// dispatcher creates: 1 for a single server, 3 (or 5) in a JetStream
	// cluster, so that an enqueue is acknowledged only once a majority
	// of the replicas holds it. An existing stream keeps its replica
	// count. Zero means 1; at most 5.
	Replicas int `yaml:"replicas"`
}

// DefaultNATSReplicas is nats.replicas's default.
const DefaultNATSReplicas = 1

// NATSOptions returns the options of a connection to nats.url, without the
// URL itself (pass c.NATS.URL to nats.Connect): the client name "sluice",
// reconnecting forever, the credentials (user and password, token, or
// credentials file) and TLS. It reads the files each time it is called. Its
// error matches ErrInvalid and names no secret.
func (c *Config) NATSOptions() ([]nats.Option, error) {
	opts, ps := c.natsOptions()
	if len(ps) > 0 {
		return nil, joinProblems(ps)
	}
	return opts, nil
}

// ConnectNATS connects to nats.url with NATSOptions. It gives up when ctx
// ends while it dials; once connected, the connection outlives ctx and
// reconnects on its own. The caller closes it.
func (c *Config) ConnectNATS(ctx context.Context) (*nats.Conn, error) {
	opts, err := c.NATSOptions()
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("config: connect to nats: %w", err)
	}
	d := &connectDialer{ctx: ctx}
	d.Timeout = natsDialTimeout
	timeout := natsDialTimeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, max(time.Until(deadline), time.Millisecond))
	}
	opts = append(opts, nats.SetCustomDialer(d), nats.Timeout(timeout))
	nc, err := nats.Connect(c.NATS.URL, opts...)
	d.connected.Store(true)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("config: connect to nats at %s: %w", redactURLs(c.NATS.URL, urlKeys["nats.url"]), err)
	}
	return nc, nil
}

// connectDialer dials with ctx until the first connection is made, and
// without it for the reconnections that follow.
type connectDialer struct {
	net.Dialer
	ctx       context.Context
	connected atomic.Bool
}

// Dial dials address.
func (d *connectDialer) Dial(network, address string) (net.Conn, error) {
	ctx := d.ctx
	if d.connected.Load() {
		ctx = context.Background()
	}
	return d.DialContext(ctx, network, address)
}

func (c *Config) natsOptions() ([]nats.Option, []*problem) {
	n := &c.NATS
	urlUser, ps := checkNATSURLs(n.URL)
	password, p := secretOrFile("nats.password", n.Password, n.PasswordFile)
	ps = appendProblem(ps, p)
	token, p := secretOrFile("nats.token", n.Token, n.TokenFile)
	ps = appendProblem(ps, p)
	if n.CredsFile != "" {
		if _, err := readSmallFile(n.CredsFile); err != nil {
			ps = append(ps, problemf("nats.creds_file", "%v", err))
		}
	}
	ps = append(ps, checkNATSAuth(urlUser, n.User, password, token, n.CredsFile)...)
	if n.Replicas < 0 || n.Replicas > 5 {
		ps = append(ps, problemf("nats.replicas", "must be from 1 to 5 (0 means 1), got %d", n.Replicas))
	}
	opts := []nats.Option{nats.Name("sluice"), nats.MaxReconnects(-1)}
	switch {
	case n.User != "":
		opts = append(opts, nats.UserInfo(n.User, password))
	case token != "":
		opts = append(opts, nats.Token(token))
	case n.CredsFile != "":
		opts = append(opts, nats.UserCredentials(n.CredsFile))
	}
	if n.TLS.isSet() {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		ps = append(ps, n.TLS.apply("nats.tls", cfg)...)
		opts = append(opts, nats.Secure(cfg))
	}
	return opts, ps
}

func appendProblem(ps []*problem, p *problem) []*problem {
	if p != nil {
		ps = append(ps, p)
	}
	return ps
}

// checkNATSURLs checks a comma-separated list of server URLs, and reports
// whether one holds credentials.
func checkNATSURLs(raw string) (hasUser bool, ps []*problem) {
	for one := range strings.SplitSeq(raw, ",") {
		u, msg := parseURL(strings.TrimSpace(one))
		switch {
		case msg != "":
			return hasUser, []*problem{problemf("nats.url", "%s", msg)}
		case u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss":
			return hasUser, []*problem{problemf("nats.url", "must start with nats://, tls://, ws:// or wss://, got scheme %q", u.Scheme)}
		case u.Host == "":
			return hasUser, []*problem{problemf("nats.url", "has no host")}
		}
		hasUser = hasUser || u.User != nil
	}
	return hasUser, nil
}

// secretOrFile returns the secret given as key, or read from the file
// given as key+"_file"; not both.
func secretOrFile(key string, value Secret, path string) (string, *problem) {
	if path == "" {
		return value.Reveal(), nil
	}
	if value != "" {
		return "", problemf(key+"_file", "%s is set too; give one of them", key)
	}
	return readSecretFile(key+"_file", path)
}

// checkNATSAuth allows one way to authenticate, and a user only with a
// password.
func checkNATSAuth(urlUser bool, user, password, token, creds string) []*problem {
	var ps []*problem
	switch {
	case user != "" && password == "":
		ps = append(ps, problemf("nats.password", "required with nats.user (or nats.password_file)"))
	case user == "" && password != "":
		ps = append(ps, problemf("nats.user", "required with nats.password"))
	}
	ways := []struct {
		key string
		set bool
	}{{"nats.url", urlUser}, {"nats.user", user != ""}, {"nats.token", token != ""}, {"nats.creds_file", creds != ""}}
	first := ""
	for _, w := range ways {
		switch {
		case !w.set:
		case first == "":
			first = w.key
		default:
			ps = append(ps, problemf(w.key, "cannot be used with the credentials of %s; give one way to authenticate", first))
		}
	}
	return ps
}
