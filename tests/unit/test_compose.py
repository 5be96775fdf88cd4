"""docker-compose.yml and the Dockerfile, without a Docker engine.

The compose file is validated against the compose-spec JSON schema (vendored, with its
licence, by the ``check-jsonschema`` package), and every file, port and service name
it or the telemetry configs reference is checked against what exists in the repo.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, Any] = COMPOSE["services"]
OBS = ROOT / "observability"


def _compose_schema() -> dict[str, Any]:
    vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads((vendor / "compose-spec.json").read_text())  # type: ignore[no-any-return]


def _env(service: str) -> dict[str, str]:
    return {k: str(v) for k, v in (SERVICES[service].get("environment") or {}).items()}


def _bind_mounts() -> list[tuple[str, str, str]]:
    mounts = []
    for name, service in SERVICES.items():
        for volume in service.get("volumes") or []:
            source, _, rest = volume.partition(":")
            if source.startswith("./"):
                mounts.append((name, source, rest.split(":")[0]))
    return mounts


def test_compose_file_matches_the_compose_spec_schema():
    jsonschema.validate(COMPOSE, _compose_schema())


def test_schema_is_the_compose_spec_and_its_licence_ships_with_it():
    schema = _compose_schema()
    assert "compose" in (schema.get("title", "") + schema.get("$id", "")).lower()
    licences = resources.files("check_jsonschema.builtin_schemas.vendor") / "licenses"
    assert any("compose" in entry.name.lower() for entry in licences.iterdir())


def test_every_required_component_is_there():
    for name in ("postgres", "temporal", "temporal-ui", "api", "worker", "otel-collector",
                 "jaeger", "prometheus", "grafana"):
        assert name in SERVICES, name
    assert _env("temporal")["POSTGRES_SEEDS"] == "postgres"  # Temporal persists in that Postgres
    assert "postgres" in SERVICES["temporal"]["depends_on"]


def test_bind_mounted_paths_exist():
    mounts = _bind_mounts()
    assert mounts
    for service, source, _target in mounts:
        assert (ROOT / source).exists(), f"{service} mounts missing {source}"


def test_external_images_are_pinned_and_built_ones_come_from_the_dockerfile():
    for name, service in SERVICES.items():
        if "build" in service:
            assert service["build"] in (".", {"context": "."}), name
            assert (ROOT / "Dockerfile").exists()
            continue
        image = service["image"]
        assert ":" in image and not image.endswith(":latest"), (name, image)


def test_worker_scales_with_docker_compose_scale():
    worker = SERVICES["worker"]
    assert "container_name" not in worker
    assert not worker.get("ports"), "a host port would clash between replicas"
    port = _env("worker")["OVERSEER_METRICS_PORT_WORKER"]
    assert port in [str(p) for p in worker.get("expose", [])]
    assert _env("worker")["OVERSEER_METRICS_HOST_WORKER"] == "0.0.0.0"


def test_prometheus_scrapes_the_services_on_their_ports():
    config = yaml.safe_load((OBS / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    api_port = _env("api")["OVERSEER_API_PORT"]
    assert jobs["overseer-api"]["static_configs"][0]["targets"] == [f"api:{api_port}"]
    assert f"{api_port}:{api_port}" in SERVICES["api"]["ports"]
    sd = jobs["overseer-worker"]["dns_sd_configs"][0]
    assert sd["names"] == ["worker"] and str(sd["port"]) == _env("worker")["OVERSEER_METRICS_PORT_WORKER"]
    mounted = {target for service, _s, target in _bind_mounts() if service == "prometheus"}
    for rule_file in config["rule_files"]:
        assert f"/etc/prometheus/{rule_file}" in mounted
        assert (OBS / "prometheus" / rule_file).exists()
    command = " ".join(SERVICES["prometheus"]["command"])
    assert "--config.file=/etc/prometheus/prometheus.yml" in command
    assert "exemplar-storage" in command


def test_traces_flow_api_and_worker_to_collector_to_jaeger():
    collector = yaml.safe_load((OBS / "otel-collector" / "config.yaml").read_text())
    pipeline = collector["service"]["pipelines"]["traces"]
    for kind in ("receivers", "processors", "exporters"):
        for name in pipeline[kind]:
            assert name in collector[kind], (kind, name)
    grpc = collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    grpc_port = grpc.rsplit(":", 1)[1]
    for service in ("api", "worker"):
        assert _env(service)["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://otel-collector:{grpc_port}"
    assert grpc_port in [str(p) for p in SERVICES["otel-collector"]["expose"]]
    target = collector["exporters"]["otlp/jaeger"]["endpoint"]
    host, port = target.split(":")
    assert host == "jaeger" and port in [str(p) for p in SERVICES["jaeger"]["expose"]]
    mounted = {target for service, _s, target in _bind_mounts() if service == "otel-collector"}
    config_arg = SERVICES["otel-collector"]["command"][0].split("=", 1)[1]
    assert config_arg in mounted


def test_grafana_provisions_the_generated_dashboards_and_the_datasources_they_use():
    mounts = {target: source for service, source, target in _bind_mounts() if service == "grafana"}
    provider = yaml.safe_load((OBS / "grafana" / "provisioning" / "dashboards" / "dashboards.yml")
                              .read_text())["providers"][0]
    dashboards_dir = provider["options"]["path"]
    assert mounts[dashboards_dir] == "./observability/grafana/dashboards"
    assert "/etc/grafana/provisioning/datasources" in mounts
    sources = yaml.safe_load((OBS / "grafana" / "provisioning" / "datasources" / "datasources.yml")
                             .read_text())["datasources"]
    by_uid = {s["uid"]: s for s in sources}
    for source in sources:
        host, port = re.match(r"http://([\w-]+):(\d+)", source["url"]).groups()  # type: ignore[union-attr]
        assert host in SERVICES
        published = [p.split(":")[-1] for p in SERVICES[host].get("ports", [])]
        assert port in published + [str(p) for p in SERVICES[host].get("expose", [])], source
    for dest in by_uid["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]:
        assert dest["datasourceUid"] in by_uid
    used: set[str] = set()
    for path in (OBS / "grafana" / "dashboards").glob("*.json"):
        used |= set(re.findall(r'"uid": "([\w-]+)"', path.read_text())) - {json.loads(
            path.read_text())["uid"]}
    assert used <= set(by_uid), used - set(by_uid)
    home = _env("grafana")["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (ROOT / "observability" / "grafana" / "dashboards" / Path(home).name).exists()


def test_dockerfile_copies_what_exists_and_exposes_the_configured_ports():
    text = (ROOT / "Dockerfile").read_text()
    for line in re.findall(r"^COPY (.+)$", text, flags=re.M):
        *sources, _dest = line.split()
        for source in sources:
            assert (ROOT / source).exists(), source
    packages = re.search(r'include = \[(.*?)\]', (ROOT / "pyproject.toml").read_text()).group(1)  # type: ignore[union-attr]
    for package in re.findall(r'"(\w+)\*"', packages):
        assert f"COPY {package} ./{package}" in text, package
    exposed = re.search(r"^EXPOSE (.+)$", text, flags=re.M).group(1).split()  # type: ignore[union-attr]
    assert _env("api")["OVERSEER_API_PORT"] in exposed
    assert _env("worker")["OVERSEER_METRICS_PORT_WORKER"] in exposed
    assert 'overseer = "services.cli:app"' in (ROOT / "pyproject.toml").read_text()
    for service in ("api", "worker"):
        assert SERVICES[service]["command"][0] == "overseer"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".overseer" in ignored and ".git" in ignored


def test_no_placeholder_secrets_are_baked_into_the_api():
    tokens = _env("api")["OVERSEER_API_TOKENS"]
    assert tokens.startswith("${OVERSEER_API_TOKENS:?"), "tokens must come from the environment"
    assert _env("api")["OVERSEER_ENVIRONMENT"] == "production"


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool (Debian's prometheus package) is not installed")
def test_promtool_accepts_the_prometheus_config_and_rules():
    for args in (["check", "config", str(OBS / "prometheus" / "prometheus.yml")],
                 ["check", "config", str(OBS / "prometheus" / "prometheus-local.yml")],
                 ["check", "rules", str(OBS / "prometheus" / "alerts.yml")]):
        done = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_schema_refuses_a_misspelt_key():
    broken = json.loads(json.dumps(COMPOSE))
    broken["services"]["worker"]["replica"] = 3
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, _compose_schema())
