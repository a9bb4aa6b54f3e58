package main

import (
	"fmt"
	"os"
	"strings"
)

// The secrets the server needs come from its environment (or, for the admin token, a file), never
// from flags: a command line is readable by every user of the machine, in /proc/<pid>/cmdline and
// ps, while the environment is readable only by the process's own user (and root).
const (
	// EnvAdminToken names the environment variable with the token that authorises
	// POST /v1/sandbox/credentials (-admin-token-file reads it from a file instead; neither: a fresh one).
	EnvAdminToken = "SVC_ADMIN_TOKEN"
	// EnvPostgresDSN names the environment variable with the PostgreSQL DSN; unset: everything in memory.
	EnvPostgresDSN = "SVC_POSTGRES_DSN"
	// EnvRedisURL names the environment variable with the Redis URL for idempotency records.
	EnvRedisURL = "SVC_REDIS_URL"
)

// secretsHelp ends the usage text: where the secrets go.
const secretsHelp = `
Secrets come from the environment, never from flags (a command line is visible to every user):
  ` + EnvPostgresDSN + `  PostgreSQL DSN: credentials, orders, endpoints, events, pins and idempotency
                    records live there, shared by every replica started with it
  ` + EnvRedisURL + `     Redis URL (redis://host:port/db): idempotency records live there instead
  ` + EnvAdminToken + `   token that authorises POST /v1/sandbox/credentials (or -admin-token-file;
                    neither: a fresh one, printed at start)
`

// secretFlags are the flags that once carried a secret, with where the value goes now.
var secretFlags = map[string]string{
	"admin-token": EnvAdminToken + ", or pass -admin-token-file FILE",
	"postgres":    EnvPostgresDSN,
	"redis":       EnvRedisURL,
}

// refuseSecretFlags refuses a flag that would put a secret on the command line, saying where the
// value goes instead and never echoing it.
func refuseSecretFlags(args []string) error {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if where, ok := secretFlags[name]; ok && strings.HasPrefix(a, "-") {
			return fmt.Errorf("there is no -%s flag: a command line is visible to every user of the machine (/proc/<pid>/cmdline, ps); set %s", name, where)
		}
	}
	return nil
}

// secrets are the server's secret settings.
type secrets struct {
	adminToken, postgresDSN, redisURL string
}

// readSecrets reads the secrets from the environment, and the admin token from tokenFile when it is
// set. Surrounding white space (a file's final newline) is not part of a value.
func readSecrets(getenv func(string) string, tokenFile string) (secrets, error) {
	s := secrets{
		adminToken:  strings.TrimSpace(getenv(EnvAdminToken)),
		postgresDSN: strings.TrimSpace(getenv(EnvPostgresDSN)),
		redisURL:    strings.TrimSpace(getenv(EnvRedisURL)),
	}
	if tokenFile == "" {
		return s, nil
	}
	if s.adminToken != "" {
		return secrets{}, fmt.Errorf("%s and -admin-token-file are both set: give the admin token one way, not both", EnvAdminToken)
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return secrets{}, fmt.Errorf("-admin-token-file: %w", err)
	}
	if s.adminToken = strings.TrimSpace(string(b)); s.adminToken == "" {
		return secrets{}, fmt.Errorf("-admin-token-file %s is empty", tokenFile)
	}
	return s, nil
}
