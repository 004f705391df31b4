// Package deploy holds no code: its directory keeps the files that run
// sluice like production (Prometheus' configuration and alerts, Grafana's
// provisioning and dashboard), and its tests check them together with the
// Dockerfile, .dockerignore and docker-compose.yml at the repository root
// and configs/sluice-compose.yaml:
//
//   - the Compose file parses with the Compose specification's own loader,
//     has the services, ports, health checks and volumes it should, and the
//     configuration it mounts passes the dispatcher's validation with the
//     environment Compose gives it;
//   - every metric the dashboard and the alerts query is one a running
//     replica exports, scraped from its /metrics;
//   - the Dockerfile's build line, run as written, builds the four static
//     binaries, and the final image is small, non-root and health-checked;
//   - the binaries run with the command lines Compose gives them.
//
// No Docker engine is needed: docs/operations.md says what is checked here
// and what only a real `docker compose up` shows.
package deploy
