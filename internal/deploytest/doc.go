// Package deploytest checks the deployment files at the repository root:
// Dockerfile, .dockerignore, docker-compose.yml, configs/compose,
// configs/prometheus.yml and configs/grafana. Its tests need no Docker
// engine for the static checks; the image build and `docker compose config`
// run only where Docker (and its compose plugin) is available.
package deploytest
