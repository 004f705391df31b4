package config

import "strings"

// Admin is the admin: section: what the operator's console on the metrics
// listener needs.
type Admin struct {
	// TokenFile names a file holding the token that the console's actions
	// (pause, resume, set rate, requeue, delete, purge) and its payload view
	// ask for. Zero means no token: the console is read-only.
	TokenFile string `yaml:"token_file"`
	// AllowedHosts are the host names, besides IP addresses, localhost and
	// names under .localhost, that the console answers a request for (the
	// name an operator reaches it by through a proxy or DNS): any other
	// Host is refused with 421, against DNS rebinding. Names only, no
	// port. Zero means none.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// AdminToken returns the console's token read from admin.token_file, or ""
// when none is configured. Validate has checked that the file reads.
func (c *Config) AdminToken() (string, error) {
	if c.Admin.TokenFile == "" {
		return "", nil
	}
	tok, p := readSecretFile("admin.token_file", c.Admin.TokenFile)
	if p != nil {
		return "", line{p}
	}
	return tok, nil
}

// validateAdmin checks that admin.token_file, when given, reads, and
// that admin.allowed_hosts holds host names.
func (c *Config) validateAdmin(ps *problems) {
	for _, h := range c.Admin.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/[] ") {
			ps.addf("admin.allowed_hosts", "%q: give a host name, without a scheme or port (sluice.example.com)", h)
		}
	}
	if c.Admin.TokenFile == "" {
		return
	}
	if _, p := readSecretFile("admin.token_file", c.Admin.TokenFile); p != nil {
		ps.add(p)
	}
}

// LoadAdmin is Load for the admin commands (status, set-rate, pause, dlq,
// job), which send nothing to the provider: like LoadProducer, pacer.rate
// and sink.url are not required, and neither sink.auth.secret_file nor
// admin.token_file is read, so that the commands need only the keys they
// use (queue.name, queue.backend, redis.url, nats.url, and the servers'
// credentials) on an operator's machine without the provider's secret.
func LoadAdmin(path string, env []string, flags map[string]string) (*Config, error) {
	return load(path, env, flags, forClient)
}
