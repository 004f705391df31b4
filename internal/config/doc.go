// Package config loads sluice's one configuration file, for both binaries,
// and turns it into the configuration structs of the packages it wires
// together (queue, priority, pacer, sink) and into Redis and NATS clients.
//
// Load builds a Config in layers, each overriding the one before:
//
//  1. the defaults (each field's doc comment says what zero means);
//  2. the YAML file, when a path is given;
//  3. environment variables: SLUICE_ followed by the key in capitals with
//     '.' as '_' (SLUICE_PACER_RATE=500 sets pacer.rate,
//     SLUICE_SINK_MAX_IN_FLIGHT sets sink.max_in_flight). Names are matched
//     against the set of real keys, so keys that contain '_' work. A list
//     is comma-separated (SLUICE_QUEUE_PRIVILEGED_USERS=alice,bob), lanes
//     are name[:weight] pairs (SLUICE_QUEUE_LANES=vip:8,default:2), and
//     SLUICE_SINK_HEADERS_X_API_KEY=... sets the header X-Api-Key ('_'
//     becomes '-'). An empty value is the zero value of the key, which
//     means its default. SLUICE_CONFIG (EnvConfigFile) is left to the
//     caller, to name the file;
//  4. flags: a map from the dotted key ("pacer.rate") to its value as text,
//     read like an environment variable's value.
//
// Load refuses unknown keys (in the file, as SLUICE_ variables, as flags)
// and impossible values, and reports every problem at once in one error
// matching ErrInvalid, one line per problem, each starting with the key it
// is about: "pacer.rate: must be more than 0 ...". The checks are this
// package's own and each package's Config.Validate.
//
// Secrets (nats.password, nats.token, the contents of password_file and
// token_file, sink.headers values, and passwords inside URLs) never appear
// in an error, in Redacted, or when a Config or a Secret is printed or
// logged.
//
// The layering, the YAML parsing and the environment are read with
// github.com/knadh/koanf/v2, a maintained configuration library; decoding
// into the structs, the key checks and the error messages are this
// package's own, so that every message names its key and none quotes a
// secret.
package config
