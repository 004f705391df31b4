package config

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/testnats"
	"github.com/sluicehq/sluice/internal/testredis"
)

func ping(t *testing.T, c *Config) error {
	t.Helper()
	rdb, err := c.RedisClient()
	if err != nil {
		t.Fatalf("RedisClient: %v", err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return rdb.Ping(ctx).Err()
}

func TestRedisClientPings(t *testing.T) {
	s := testredis.Start(t, testredis.Options{})
	c := mustLoad(t, "", []string{"SLUICE_REDIS_URL=" + s.URL()}, required())
	if err := ping(t, c); err != nil {
		t.Errorf("PING: got %v, want PONG", err)
	}
}

func TestRedisClientPasswords(t *testing.T) {
	s := testredis.Start(t, testredis.Options{})
	testredis.RequireReal(t, s)
	ctx := context.Background()
	admin := s.Client()
	if err := admin.Do(ctx, "ACL", "SETUSER", "alice", "on", ">alice-pw", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "requirepass", "default-pw").Err(); err != nil {
		t.Fatal(err)
	}
	pwFile := writeFile(t, "pw", "default-pw\n")
	tests := []struct {
		name   string
		flags  map[string]string
		wantOK bool
	}{
		{"no password", map[string]string{"redis.url": s.URL()}, false},
		{"password_file", map[string]string{"redis.url": s.URL(), "redis.password_file": pwFile}, true},
		{"password in the url", map[string]string{"redis.url": "redis://:default-pw@" + s.Addr() + "/0"}, true},
		{"user and password in the url", map[string]string{"redis.url": "redis://alice:alice-pw@" + s.Addr() + "/0"}, true},
		{"wrong password in the url", map[string]string{"redis.url": "redis://alice:wrong@" + s.Addr() + "/0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, "", nil, withRequired(tt.flags))
			err := ping(t, c)
			if got := err == nil; got != tt.wantOK {
				t.Errorf("PING: got error %v, want success %v", err, tt.wantOK)
			}
		})
	}
}

func TestRedisOptionsFromURL(t *testing.T) {
	ca, cert, key := writeCert(t)
	tests := []struct {
		name  string
		flags map[string]string
		check func(*redis.Options) string
	}{
		{"address and database", map[string]string{"redis.url": "redis://10.0.0.1:6380/3?dial_timeout=2s"}, func(o *redis.Options) string {
			if o.Addr != "10.0.0.1:6380" || o.DB != 3 || o.DialTimeout != 2*time.Second || o.TLSConfig != nil {
				return "want 10.0.0.1:6380, db 3, dial timeout 2s, no TLS"
			}
			return ""
		}},
		{"rediss with files", map[string]string{"redis.url": "rediss://redis.example.com:6380/0",
			"redis.tls.ca_file": ca, "redis.tls.cert_file": cert, "redis.tls.key_file": key}, func(o *redis.Options) string {
			tc := o.TLSConfig
			if tc == nil || tc.ServerName != "redis.example.com" || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
				return "want TLS to redis.example.com with the CA and a client certificate"
			}
			return ""
		}},
		{"rediss insecure", map[string]string{"redis.url": "rediss://h:6380", "redis.tls.insecure_skip_verify": "true"}, func(o *redis.Options) string {
			if o.TLSConfig == nil || !o.TLSConfig.InsecureSkipVerify {
				return "want TLS without verification"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, "", nil, withRequired(tt.flags))
			o, err := c.RedisOptions()
			if err != nil {
				t.Fatal(err)
			}
			if msg := tt.check(o); msg != "" {
				t.Errorf("got addr %s db %d tls %+v: %s", o.Addr, o.DB, o.TLSConfig != nil, msg)
			}
		})
	}
}

func TestRedisTLSProblems(t *testing.T) {
	ca, cert, _ := writeCert(t)
	notPEM := writeFile(t, "ca.pem", "not a certificate")
	tests := []struct {
		flags map[string]string
		key   string
	}{
		{map[string]string{"redis.tls.ca_file": ca}, "redis.tls"}, // redis://, not rediss://
		{map[string]string{"redis.url": "rediss://h", "redis.tls.ca_file": notPEM}, "redis.tls.ca_file"},
		{map[string]string{"redis.url": "rediss://h", "redis.tls.cert_file": cert}, "redis.tls.key_file"},
		{map[string]string{"redis.url": "rediss://h", "redis.tls.cert_file": cert, "redis.tls.key_file": notPEM}, "redis.tls.cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := Load("", nil, withRequired(tt.flags))
			if keys := problemKeys(t, err); len(keys) != 1 || keys[0] != tt.key {
				t.Errorf("got problems about %v, want %s; error:\n%v", keys, tt.key, err)
			}
		})
	}
}

func connect(ctx context.Context, t *testing.T, flags map[string]string) error {
	t.Helper()
	c := mustLoad(t, "", nil, withRequired(flags))
	nc, err := c.ConnectNATS(ctx)
	if err != nil {
		return err
	}
	defer nc.Close()
	return nc.FlushTimeout(10 * time.Second)
}

func TestConnectNATS(t *testing.T) {
	s := testnats.Start(t)
	if err := connect(t.Context(), t, map[string]string{"nats.url": s.URL()}); err != nil {
		t.Errorf("connect and flush: got %v, want success", err)
	}
}

func TestConnectNATSAuth(t *testing.T) {
	userURL := startNATS(t, server.Options{Username: "bob", Password: "bob-pw"})
	tokenURL := startNATS(t, server.Options{Authorization: "tok-123"})
	pw := writeFile(t, "pw", "bob-pw\n")
	token := writeFile(t, "token", "tok-123\n")
	withUser := func(u string) string { return strings.Replace(userURL, "nats://", "nats://"+u+"@", 1) }
	tests := []struct {
		name   string
		flags  map[string]string
		wantOK bool
	}{
		{"user and password", map[string]string{"nats.url": userURL, "nats.user": "bob", "nats.password": "bob-pw"}, true},
		{"user and password_file", map[string]string{"nats.url": userURL, "nats.user": "bob", "nats.password_file": pw}, true},
		{"user and password in the url", map[string]string{"nats.url": withUser("bob:bob-pw")}, true},
		{"wrong password", map[string]string{"nats.url": userURL, "nats.user": "bob", "nats.password": "nope"}, false},
		{"no credentials", map[string]string{"nats.url": userURL}, false},
		{"token", map[string]string{"nats.url": tokenURL, "nats.token": "tok-123"}, true},
		{"token_file", map[string]string{"nats.url": tokenURL, "nats.token_file": token}, true},
		{"wrong token", map[string]string{"nats.url": tokenURL, "nats.token": "nope"}, false},
		{"token in the url", map[string]string{"nats.url": strings.Replace(tokenURL, "nats://", "nats://tok-123@", 1)}, true},
		{"wrong token in the url", map[string]string{"nats.url": strings.Replace(tokenURL, "nats://", "nats://nope@", 1)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := connect(t.Context(), t, tt.flags)
			if got := err == nil; got != tt.wantOK {
				t.Errorf("connect: got error %v, want success %v", err, tt.wantOK)
			}
			for _, s := range []string{"bob-pw", "tok-123", "nope"} {
				if err != nil && strings.Contains(err.Error(), s) {
					t.Errorf("got a secret in the error: %v", err)
				}
			}
		})
	}
}

// A token in nats.url (nats://TOKEN@host) is hidden from the error of a
// failed connection, which names the URL.
func TestConnectNATSErrorHidesTheURLToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := connect(ctx, t, map[string]string{"nats.url": "nats://s3cr3ttoken@127.0.0.1:1"})
	if err == nil {
		t.Fatal("connect to a closed port: got success, want an error")
	}
	if msg := err.Error(); strings.Contains(msg, "s3cr3ttoken") || !strings.Contains(msg, "nats://***@127.0.0.1:1") {
		t.Errorf("connect: got error %q; want it to name nats://***@127.0.0.1:1 and not the token", msg)
	}
}

func TestConnectNATSTLS(t *testing.T) {
	ca, cert, key := writeCert(t)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	u := startNATS(t, server.Options{TLS: true, TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}})
	if err := connect(t.Context(), t, map[string]string{"nats.url": u, "nats.tls.ca_file": ca}); err != nil {
		t.Errorf("connect trusting the server's CA: got %v, want success", err)
	}
	if err := connect(t.Context(), t, map[string]string{"nats.url": u}); err == nil {
		t.Error("connect without TLS settings to a TLS server: got success, want an error")
	}
}

func TestConnectNATSGivesUpWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := connect(ctx, t, map[string]string{"nats.url": "nats://127.0.0.1:1"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ended context: got %v, want context.Canceled", err)
	}
	// A server that accepts and never speaks: the deadline bounds the wait.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 1)
	go func() {
		if conn, err := l.Accept(); err == nil {
			held <- conn
		}
	}()
	t.Cleanup(func() {
		l.Close()
		select {
		case conn := <-held:
			conn.Close()
		default:
		}
	})
	ctx, cancel = context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = connect(ctx, t, map[string]string{"nats.url": "nats://" + l.Addr().String()})
	if err == nil {
		t.Fatal("connect to a silent server: got success, want an error")
	}
	if waited := time.Since(start); waited > 4*time.Second { // far below the 5s per-dial bound
		t.Errorf("connect to a silent server: gave up after %s, want about the context's 200ms", waited)
	}
}

func TestNATSOptionProblems(t *testing.T) {
	tests := []struct {
		flags map[string]string
		key   string
	}{
		{map[string]string{"nats.url": "http://h:4222"}, "nats.url"},
		{map[string]string{"nats.url": "nats://a:4222,nats://"}, "nats.url"},
		{map[string]string{"nats.user": "u"}, "nats.password"},
		{map[string]string{"nats.password": "p"}, "nats.user"},
		{map[string]string{"nats.token": "t", "nats.creds_file": os.Args[0]}, "nats.creds_file"},
		{map[string]string{"nats.tls.key_file": os.Args[0]}, "nats.tls.cert_file"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, err := Load("", nil, withRequired(tt.flags))
			if keys := problemKeys(t, err); len(keys) != 1 || keys[0] != tt.key {
				t.Errorf("got problems about %v, want %s; error:\n%v", keys, tt.key, err)
			}
		})
	}
}

// startNATS runs a NATS server with opts on a free loopback port until the
// test ends, and returns its URL.
func startNATS(t *testing.T, opts server.Options) string {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	srv, err := server.NewServer(&opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		t.Fatal("nats server not ready after 10s")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// writeCert writes a self-signed certificate for 127.0.0.1 and localhost,
// which serves as its own CA, and its key; it returns the files.
func writeCert(t *testing.T) (ca, cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sluice test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(path, typ string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(cert, "CERTIFICATE", der)
	write(key, "PRIVATE KEY", keyDER)
	return cert, cert, key
}
