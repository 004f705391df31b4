package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
)

// TLS is a client's TLS material. The zero value uses the system's roots
// and presents no client certificate.
type TLS struct {
	// CAFile is a PEM file of the certificate authorities to trust instead
	// of the system's. Optional.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// mutual TLS. Optional; both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify accepts any server certificate. For tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// maxSecretFile bounds a password, token or credentials file.
const maxSecretFile = 64 << 10

// readSecretFile reads a password or token from the file at path, trimmed
// of surrounding white space. Its problem, about key, never shows the
// file's content.
func readSecretFile(key, path string) (string, *problem) {
	b, err := readSmallFile(path)
	if err != nil {
		return "", problemf(key, "%v", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", problemf(key, "%s is empty", path)
	}
	return s, nil
}

// readSmallFile reads the file at path, refusing one over maxSecretFile.
func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFile)
	}
	return b, nil
}

// isSet reports whether any TLS key is set.
func (t TLS) isSet() bool { return t != TLS{} }

// apply loads t's files into cfg. Its problems are about the keys under
// prefix ("redis.tls").
func (t TLS) apply(prefix string, cfg *tls.Config) []*problem {
	var ps []*problem
	if t.CAFile != "" {
		pool, err := loadCAs(t.CAFile)
		if err != nil {
			ps = append(ps, problemf(prefix+".ca_file", "%v", err))
		}
		cfg.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps = append(ps, problemf(prefix+".key_file", "required with %s.cert_file", prefix))
	case t.CertFile == "" && t.KeyFile != "":
		ps = append(ps, problemf(prefix+".cert_file", "required with %s.key_file", prefix))
	case t.CertFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			ps = append(ps, problemf(prefix+".cert_file", "with %s.key_file: %v", prefix, err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	cfg.InsecureSkipVerify = t.InsecureSkipVerify
	return ps
}

func loadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate found in %s", path)
	}
	return pool, nil
}

// parseURL parses raw. Its message never quotes a part of raw when raw may
// hold a secret (credentials, a query), since net/url's errors quote the
// part they choke on.
func parseURL(raw string) (*url.URL, string) {
	if raw == "" {
		return nil, "required"
	}
	u, err := url.Parse(raw)
	if err == nil {
		return u, ""
	}
	if strings.ContainsAny(raw, "@?") {
		return nil, "not a valid URL (details left out: it holds credentials or a query)"
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // url.Error quotes the whole URL
	}
	return nil, fmt.Sprintf("not a valid URL: %v", err)
}
