// Package config loads sluice's one configuration file, for both binaries,
// and turns it into the configuration structs of the packages it wires
// together (queue, priority, pacer, sink) and into Redis and NATS clients.
//
// Each section of the file is, or embeds, the configuration struct of the
// package it configures — pacer.Config is pacer:, queue.Config and
// priority.Config are queue:, sink.HTTPConfig is sink:, dispatch.Config
// is dispatch: — and the keys are those structs' yaml tags, so that a
// field a package adds, tagged, is a key at once: in the file, as a SLUICE_
// variable, as a flag, and in Redacted. What is this package's own is what
// crosses sections: the Redis and NATS sections and their clients, the
// secrets and the files that hold them, the environment's names, the
// unknown keys and the hints.
//
// Load builds a Config in layers, each overriding the one before:
//
//  1. the defaults (each field's doc comment says what zero means), which
//     each package's SetDefaults applies;
//  2. the YAML file, when a path is given;
//  3. environment variables: SLUICE_ followed by the key in capitals with
//     '.' as '_' (SLUICE_PACER_RATE=500 sets pacer.rate,
//     SLUICE_SINK_MAX_IN_FLIGHT sets sink.max_in_flight). Names are matched
//     against the set of real keys, so keys that contain '_' work. A list
//     is comma-separated (SLUICE_QUEUE_PRIVILEGED_USERS=alice,bob), lanes
//     are name[:weight] pairs (SLUICE_QUEUE_LANES=vip:8,default:2), and
//     an entry of a mapping is named by the rest of the variable's name:
//     SLUICE_SINK_HEADERS_X_API_KEY=... sets the header X-Api-Key ('_'
//     becomes '-', the name is canonicalised), while
//     SLUICE_PACER_TENANTS_RATES_acme=5 sets tenant acme, the name as
//     written, case and '_' kept, since tenants are matched exactly
//     (..._ACME would set tenant ACME). An empty value is the zero value
//     of the key, which means its default. SLUICE_CONFIG (EnvConfigFile)
//     is left to the caller, to name the file;
//  4. flags: a map from the dotted key ("pacer.rate") to its value as text,
//     read like an environment variable's value.
//
// The layering, the YAML parsing and the environment are read with
// github.com/knadh/koanf/v2, and the merged layers are decoded into the
// structs with koanf's unmarshalling (mapstructure), through a decode hook
// that reads text as durations, numbers, lists and lanes and says, for a
// value it refuses, what the key takes.
//
// Load refuses unknown keys (in the file, as SLUICE_ variables, as flags)
// and impossible values, and reports every problem at once in one error
// matching ErrInvalid, one line per problem, each starting with the key it
// is about: "pacer.rate: must be more than 0 ...". A SLUICE_ variable that
// a key names as the one to read (sink.auth.secret_env: SLUICE_SMS_SECRET)
// is not an unknown one. The checks are each package's Config.Validate,
// whose problems are *setting.Error values gathered as they are, and this
// package's own.
//
// Secrets (nats.password, nats.token, the contents of password_file and
// token_file, sink.headers values, passwords inside URLs, and the token of
// nats.url's nats://TOKEN@host) never appear in an error, in Redacted, or
// when a Config or a Secret is printed or logged.
package config
