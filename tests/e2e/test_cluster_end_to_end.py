"""The whole path on the test bed's real cluster (apiserver, kube-scheduler, kubelet, containerd)
with the simulated GPU on the node, mounted into containers as a node's driver is: the device
plugin, the extender with its admission webhook, a second kube-scheduler with deploy/'s
configuration, and the agent in cluster mode, each under its ServiceAccount bound by deploy/'s
RBAC (not the admin's credentials).

1. a pod asking nvidia.com/gpumem: 1000 is placed, its container starts with libvgpu, and
   allocating 2000 MiB gives it an ordinary out-of-memory error;
2. a pod whose process drops the shim and allocates anyway is killed, with an Event on the pod,
   gpuwarden_violations_total incremented, and the alert that `promtool test rules` proves would
   fire on that series;
3. a pod the policy denies is refused at apply;
4. the policy ConfigMap is edited and the new limit reaches the running pod's region: the
   agent reads the policy from the ConfigMap volume the kubelet keeps for a pod that mounts it
   (as the DaemonSet's agent container does), and the pod is annotated after the edit so that
   the kubelet refreshes the volume at once instead of at its next periodic sync (~1 min);
5. the agent is killed and restarted while pods run: no false kill, the slices hold.

The components run as processes on this machine (the image cannot be built here), with the
flags and credentials the DaemonSet and Deployments give them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_harness import AgentProc

pytestmark = [pytest.mark.k8s, pytest.mark.bpf, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
PROBE_SRC = REPO / "tests" / "k8s" / "deviceplugin" / "slice_probe.c"
MIB = 1 << 20
NS = "gpuwarden-system"
SOCKET = "gpuwarden-e2e.sock"
CAP_RULE = """
# the test's edit: holders get at most 800 MiB
rule "e2e-holder-cap" {
  match label app == "holder"
  cap gpumem <= 800MiB clamp
}
"""


def rendered() -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO / "tests" / "deploy"))
    from manifests import rendered as render

    return render()


def wait_for(pred: Any, timeout: float, what: str, *logs: Proc) -> Any:
    """testbed.wait_for, with the end of the given components' logs on a timeout."""
    from testbed import wait_for as tb_wait

    try:
        return tb_wait(pred, timeout, what)
    except TimeoutError as err:
        tails = "".join(f"\n---- {p.name} ({p.log}):\n{p.text()[-4000:]}" for p in logs)
        raise AssertionError(f"{err}{tails}") from None


class Proc:
    """A component process with its log file."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], folder: Path) -> None:
        self.name, self.cmd, self.env = name, cmd, env
        self.log = folder / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        with self.log.open("ab") as err:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=err, stderr=err,
                                         cwd=REPO, start_new_session=True)
        return self

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Stack:
    def __init__(self, cp: Any, node: Any, api: Any, folder: Path) -> None:
        self.cp, self.node, self.api, self.folder = cp, node, api, folder
        self.procs: list[Proc] = []
        self.agent: AgentProc | None = None
        self.policy = Path()  # the policy ConfigMap's volume, as the kubelet keeps it
        self.carrier = ""  # the pod that mounts it
        self.regions = folder / "regions"
        self.namespace = ""
        self.webhook = f"gpuwarden-e2e-{secrets.token_hex(3)}"
        self.label = {"gpuwarden.io/e2e": self.webhook}

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def log_tails(self) -> str:
        out = [f"--- {p.name}:\n{p.text()[-3000:]}" for p in self.procs]
        if self.agent is not None:
            out.append(f"--- agent:\n{self.agent.stderr()[-3000:]}")
        return "\n".join(out)


def _kubeconfig(stack: Stack, account: str) -> Path:
    from kubernetes import client
    from testbed.controlplane import write_kubeconfig

    req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[]))
    token = stack.core().create_namespaced_service_account_token(account, NS, req).status.token
    return write_kubeconfig(stack.folder / f"{account}.kubeconfig", stack.cp.url,
                            stack.cp.pki.ca.cert, token=token)


def _apply(admin: Path, docs: list[dict[str, Any]]) -> None:
    out = subprocess.run([shutil.which("kubectl") or "kubectl", f"--kubeconfig={admin}",
                          "apply", "--server-side", "-f", "-"],
                         input="\n---\n".join(yaml.safe_dump(d) for d in docs),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def stack(k8s_cluster: Any, k8s_node: Any, k8s_api: Any,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    from kubernetes import client
    from testbed.node import DEVICE_PLUGIN_DIR
    from testbed.procs import free_ports

    from libvgpu.paths import shim_path, sim_lib_dir
    from libvgpu.sim import sim_env

    folder = tmp_path_factory.mktemp("cluster-e2e")
    os.chmod(folder, 0o755)
    st = Stack(k8s_cluster, k8s_node, k8s_api, folder)
    docs = rendered()
    admin = k8s_cluster.admin_kubeconfig
    _apply(admin, [d for d in docs if d["kind"] in (
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "RoleBinding")])
    sim_dir = folder / "sim"
    sim_dir.mkdir()
    os.chmod(sim_dir, 0o777)
    env = dict(os.environ)
    env.update(sim_env(sim_dir / "gpu.state", devices=1, memory="8GiB"))
    env["PYTHONPATH"] = str(REPO)
    st.sim_env = env
    settings = next(d for d in docs if d["kind"] == "ConfigMap"
                    and d["metadata"]["name"].startswith("gpuwarden-settings"))
    settings_file = folder / "settings.yaml"
    settings_file.write_text(settings["data"]["config.yaml"])
    st.policy = _policy_volume(st, docs)
    py = [sys.executable, "-m", "gpuwarden"]
    node_kc = _kubeconfig(st, "gpuwarden-node")
    try:
        # the device plugin, as the DaemonSet runs it (plus the test bed's socket and driver)
        plugin = Proc("deviceplugin", [
            *py, "deviceplugin", f"--config={settings_file}", f"--node={k8s_node.name}",
            f"--kubeconfig={node_kc}", f"--plugin-dir={DEVICE_PLUGIN_DIR}",
            f"--socket-name={SOCKET}",
            f"--pod-resources-socket={k8s_node.kubelet_root / 'pod-resources' / 'kubelet.sock'}",
            f"--libvgpu={shim_path()}", f"--region-root={st.regions}",
            f"--driver-mount={sim_lib_dir()}", f"--driver-mount={sim_dir}:rw",
            "--health-seconds=1"], env, folder).start()
        st.procs.append(plugin)
        wait_for(lambda: "registered nvidia.com/gpu" in plugin.text() or not plugin.alive(),
                 60, "the device plugin registering", plugin)
        assert plugin.alive(), plugin.text()
        wait_for(lambda: "gpuwarden.io/node-gpus" in (
            st.core().read_node(k8s_node.name).metadata.annotations or {}), 30,
            "the node's GPU inventory")

        # the extender and its webhook
        tls = folder / "tls"
        ext = Proc("extender", [
            *py, "extender", f"--kubeconfig={_kubeconfig(st, 'gpuwarden-extender')}",
            f"--policy={st.policy}", f"--settings={settings_file}",
            "--address=127.0.0.1", "--port=0", "--webhook-port=0",
            f"--tls-generate={tls}", "--tls-hosts=127.0.0.1"], env, folder).start()
        st.procs.append(ext)
        wait_for(lambda: "gpuwarden extender: ready" in ext.text() or not ext.alive(), 60,
                 "the extender ready", ext)
        assert ext.alive(), ext.text()
        ext_port, hook_port = re.search(r"extender on http://127\.0\.0\.1:(\d+)/; webhook on "
                                        r"https://127\.0\.0\.1:(\d+)/", ext.text()).groups()

        # the webhook configuration of deploy/, pointed at that process, for this test's
        # namespaces only (the test bed is shared)
        hook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")
        hook["metadata"] = {"name": st.webhook}
        wh = hook["webhooks"][0]
        import base64

        wh["clientConfig"] = {"url": f"https://127.0.0.1:{hook_port}/mutate",
                              "caBundle": base64.b64encode((tls / "ca.crt").read_bytes())
                              .decode()}
        wh["namespaceSelector"]["matchExpressions"].append(
            {"key": "gpuwarden.io/e2e", "operator": "In", "values": [st.webhook]})
        client.AdmissionregistrationV1Api(k8s_api).create_mutating_webhook_configuration(hook)

        # the gpuwarden-scheduler: deploy/'s configuration, its account, the extender's address
        sched_cm = next(d for d in docs if d["kind"] == "ConfigMap"
                        and d["metadata"]["name"] == "gpuwarden-scheduler-config")
        conf = yaml.safe_load(sched_cm["data"]["config.yaml"])
        conf["extenders"][0]["urlPrefix"] = f"http://127.0.0.1:{ext_port}"
        conf["clientConnection"] = {
            "kubeconfig": str(_kubeconfig(st, "gpuwarden-scheduler"))}
        (folder / "scheduler.yaml").write_text(yaml.safe_dump(conf))
        [port] = free_ports(1)
        sched = Proc("kube-scheduler", [
            str(k8s_cluster.assets.bin("kube-scheduler")),
            f"--config={folder / 'scheduler.yaml'}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", "--authentication-tolerate-lookup-failure=true"],
            env, folder).start()
        st.procs.append(sched)

        # the agent in cluster mode
        st.agent = AgentProc(folder / "agent-state", [st.policy], env, [
            "--kubernetes", f"--node={k8s_node.name}", f"--kubeconfig={node_kc}",
            f"--regions-root={st.regions}"])
        st.agent.start()
        wait_for(lambda: "acquired lease" in sched.text().lower() or not sched.alive(),
                 60, "the gpuwarden-scheduler leading", sched)
        assert sched.alive(), sched.text()

        ns = f"e2e-{secrets.token_hex(3)}"
        st.core().create_namespace({"metadata": {"name": ns, "labels": st.label}})
        wait_for(lambda: st.core().read_namespaced_service_account("default", ns), 30,
                 "the namespace's default ServiceAccount")
        st.namespace = ns
        yield st
    finally:
        with _suppress():
            client.AdmissionregistrationV1Api(k8s_api).delete_mutating_webhook_configuration(
                st.webhook)
        if st.carrier:
            with _suppress():
                st.core().delete_namespaced_pod(st.carrier, NS, grace_period_seconds=0)
        with _suppress():
            st.core().delete_namespaced_config_map("gpuwarden-policy", NS)
        if st.namespace:
            with _suppress():
                st.core().delete_namespace(st.namespace, grace_period_seconds=0)
        if st.agent is not None:
            st.agent.stop()
        for p in reversed(st.procs):
            p.stop()


def _policy_volume(st: Stack, docs: list[dict[str, Any]]) -> Path:
    """deploy/'s policy ConfigMap, created for real, mounted by a pod on the node: the folder
    the kubelet writes for that volume (the agent's container would see it at
    /etc/gpuwarden/policy)."""
    from testbed.kube import pod_manifest, wait_pod_phase

    cm = next(d for d in docs if d["kind"] == "ConfigMap"
              and d["metadata"]["name"] == "gpuwarden-policy")
    st.core().create_namespaced_config_map(NS, {"metadata": {"name": "gpuwarden-policy"},
                                                "data": cm["data"]})
    st.carrier = f"policy-carrier-{secrets.token_hex(3)}"
    pod = pod_manifest(st.carrier, "gpuwarden.test/busybox:1", ["sleep", "3600"],
                       node_name=st.node.name,
                       volumeMounts=[{"name": "policy", "mountPath": "/etc/gpuwarden/policy"}])
    pod["spec"]["volumes"] = [{"name": "policy", "configMap": {"name": "gpuwarden-policy"}}]
    made = st.core().create_namespaced_pod(NS, pod)
    wait_pod_phase(st.api, NS, st.carrier, phases=("Running",), timeout=60)
    folder = (st.node.kubelet_root / "pods" / made.metadata.uid / "volumes" /
              "kubernetes.io~configmap" / "policy")
    assert (folder / "cluster.gwp").is_file() and (folder / "..data").is_symlink()
    return folder


def _suppress() -> Any:
    import contextlib

    return contextlib.suppress(Exception)


@pytest.fixture(scope="module")
def probe_image(k8s_node: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    from cprog import compile_c
    from testbed import images

    d = tmp_path_factory.mktemp("probe")
    exe = compile_c(PROBE_SRC, d / "bin")
    image = images.build_image(d / "img", "gpuwarden.test/e2e-probe:1", {"/app/probe": exe})
    return str(k8s_node.import_image(image))


def probe_pod(name: str, image: str, stack: Stack, args: list[str], *,
              app: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod as a user writes it: only the memory it wants (no GPU count, no scheduler)."""
    sim = stack.sim_env
    envs = [{"name": k, "value": sim[k]} for k in ("LD_LIBRARY_PATH", "GPUWARDEN_SIM_STATE",
                                                   "GPUWARDEN_SIM_DEVICES",
                                                   "GPUWARDEN_SIM_MEMORY")]
    envs += [{"name": k, "value": v} for k, v in (env or {}).items()]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": [{
                         "name": "main", "image": image, "imagePullPolicy": "Never",
                         "command": ["/app/probe", *args], "env": envs,
                         "terminationMessagePolicy": "FallbackToLogsOnError",
                         "resources": {"limits": {"nvidia.com/gpumem": "1000"}}}]}}


def pod_output(stack: Stack, name: str) -> str:
    pod = stack.core().read_namespaced_pod(name, stack.namespace)
    try:
        return str(stack.node.container_log(pod))
    except Exception:
        return ""


def region_of(stack: Stack, pod: Any) -> Path:
    return stack.regions / f"{pod.metadata.uid}_main" / "vgpu.region"


def pod_events(stack: Stack, uid: str) -> list[Any]:
    return stack.core().list_namespaced_event(
        stack.namespace, field_selector=f"involvedObject.uid={uid}").items


# ---- 1. placed, started with libvgpu, out of memory beyond the slice --------------------------

def test_a_pod_asking_1000_mib_is_placed_and_gets_out_of_memory_beyond_it(
        stack: Stack, probe_image: str) -> None:
    pod = probe_pod("holder", probe_image, stack, [str(256 * MIB), str(2000 * MIB), "hold"],
                    app="holder")
    made = stack.core().create_namespaced_pod(stack.namespace, pod)
    # the webhook gave it the GPU count and the gpuwarden-scheduler
    assert made.spec.scheduler_name == "gpuwarden-scheduler"
    assert made.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
    wait_for(lambda: "alloc_beyond=" in pod_output(stack, "holder"), 90,
             "the holder's probe output\n" + stack.log_tails())
    got = dict(line.split("=", 1) for line in pod_output(stack, "holder").split())
    assert got["nvml_total"] == got["cuda_total"] == str(1000 * MIB), got
    assert got["alloc_within"] == "0" and got["alloc_beyond"] == "2", got  # OUT_OF_MEMORY
    # the container's output can reach the log before the kubelet reports the pod Running
    live = wait_for(lambda: (p := stack.core().read_namespaced_pod("holder", stack.namespace))
                    .status.phase == "Running" and p, 30, "the holder reported Running")
    assert live.spec.node_name == stack.node.name
    assignment = json.loads(live.metadata.annotations["gpuwarden.io/assignment"])
    assert assignment["containers"][0]["devices"][0]["memoryMiB"] == 1000
    assert stack.agent is not None
    stack.agent.wait_event(lambda e: e.get("event") == "workload_adopted"
                           and e["workload"]["pod"] == "holder", timeout=30)


# ---- 2. the shim dropped: killed, Event, metric, alert ----------------------------------------

def test_a_pod_that_drops_the_shim_is_killed_with_an_event_a_metric_and_an_alert(
        stack: Stack, probe_image: str, tmp_path: Path) -> None:
    pod = probe_pod("bypasser", probe_image, stack, [str(300 * MIB), str(100 * MIB), "hold"],
                    app="bypasser", env={"CUDA_DISABLE_CONTROL": "true"})
    made = stack.core().create_namespaced_pod(stack.namespace, pod)

    def terminated() -> Any:
        p = stack.core().read_namespaced_pod("bypasser", stack.namespace)
        statuses = p.status.container_statuses or []
        return statuses and statuses[0].state.terminated

    term = wait_for(terminated, 90, "the bypassing container killed\n" + stack.log_tails())
    out = pod_output(stack, "bypasser")
    assert "alloc_within=0" in out, out  # it did allocate, without the shim
    assert term.exit_code == 137, term  # SIGKILL
    events = wait_for(lambda: [e for e in pod_events(stack, made.metadata.uid)
                               if e.reason == "GpuwardenKilled"], 30, "the Event on the pod")
    assert "bypass" in events[0].message and "rule" in events[0].message, events[0].message
    assert events[0].type == "Warning" and events[0].source.component == "gpuwarden-agent"
    assert stack.agent is not None
    _, text = stack.agent.get("/metrics")
    series = [ln for ln in text.splitlines() if ln.startswith("gpuwarden_violations_total{")
              and 'pod="bypasser"' in ln and 'check="bypass"' in ln]
    assert series and float(series[0].rsplit(" ", 1)[1]) >= 1, text
    _alert_would_fire(series[0], tmp_path)


def _alert_would_fire(series_line: str, tmp: Path) -> None:
    """promtool unit test: the scraped series, counted once, fires GpuwardenPolicyAlert."""
    tool = shutil.which("promtool")
    assert tool is not None, "promtool is missing (scripts/setup.sh installs it)"
    name_labels, _value = series_line.rsplit(" ", 1)
    labels = dict(re.findall(r'(\w+)="([^"]*)"', name_labels))
    rules = yaml.safe_load((REPO / "examples/alerts/gpuwarden.rules.yml").read_text())
    [rule] = [r for g in rules["groups"] for r in g["rules"]
              if r.get("alert") == "GpuwardenPolicyAlert"]
    annotations = {k: re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], v)
                   for k, v in rule["annotations"].items()}
    (tmp / "alert_test.yml").write_text(yaml.safe_dump({
        "rule_files": [str(REPO / "examples" / "alerts" / "gpuwarden.rules.yml")],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m",
                   "input_series": [{"series": name_labels, "values": "0 1 1 1 1 1"}],
                   "alert_rule_test": [{"eval_time": "2m", "alertname": "GpuwardenPolicyAlert",
                                        "exp_alerts": [{"exp_labels": labels,
                                                        "exp_annotations": annotations}]}]}]}))
    out = subprocess.run([tool, "test", "rules", "alert_test.yml"], cwd=tmp,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# ---- 3. denied at apply -----------------------------------------------------------------------

def test_a_pod_the_policy_denies_is_refused_at_apply(stack: Stack, probe_image: str) -> None:
    from kubernetes.client.exceptions import ApiException

    ns = f"sandbox-{secrets.token_hex(3)}"
    stack.core().create_namespace({"metadata": {"name": ns, "labels": stack.label}})
    try:
        wait_for(lambda: stack.core().read_namespaced_service_account("default", ns), 30,
                 "the sandbox namespace's default ServiceAccount")
        with pytest.raises(ApiException) as refused:
            stack.core().create_namespaced_pod(
                ns, probe_pod("denied", probe_image, stack, ["1", "1"], app="denied"))
        assert refused.value.status in (400, 403)
        assert "GPU use in sandbox namespaces needs approval" in str(refused.value.body)
        assert not stack.core().list_namespaced_pod(ns).items
    finally:
        stack.core().delete_namespace(ns, grace_period_seconds=0)


# ---- 4. a policy edit reaches the running pod's region ----------------------------------------

def test_an_edited_policy_configmap_gives_the_running_pod_its_new_limit(stack: Stack) -> None:
    from libvgpu.region import Region

    pod = stack.core().read_namespaced_pod("holder", stack.namespace)
    region = region_of(stack, pod)
    with Region.open(region) as r:
        assert r.snapshot().devices[0].limit_bytes == 1000 * MIB
    assert stack.agent is not None
    n = len(stack.agent.events())
    text = (stack.policy / "cluster.gwp").read_text()
    stack.core().patch_namespaced_config_map("gpuwarden-policy", NS,
                                             {"data": {"cluster.gwp": text + CAP_RULE}})
    stack.core().patch_namespaced_pod(stack.carrier, NS, {"metadata": {"annotations": {
        "gpuwarden.test/resync": str(time.time())}}})  # the kubelet's sync, now
    stack.agent.wait_event(lambda e: e.get("event") == "policy_reload" and e["ok"], after=n,
                           timeout=30)
    assert "e2e-holder-cap" in (stack.policy / "cluster.gwp").read_text()

    def limit() -> int:
        with Region.open(region) as r:
            return int(r.snapshot().devices[0].limit_bytes)

    wait_for(lambda: limit() == 800 * MIB, 15, "the region's limit at 800 MiB")
    wait_for(lambda: [e for e in pod_events(stack, pod.metadata.uid)
                      if e.reason == "GpuwardenRuleChanged"], 30, "the rule-change Event")
    assert stack.core().read_namespaced_pod("holder", stack.namespace).status.phase == \
        "Running"


# ---- 5. agent restart: no false kill, slices hold ---------------------------------------------

def test_an_agent_restart_keeps_the_running_pods_and_their_slices(stack: Stack) -> None:
    from libvgpu.region import Region

    agent = stack.agent
    assert agent is not None
    pod = stack.core().read_namespaced_pod("holder", stack.namespace)
    with Region.open(region_of(stack, pod)) as r:
        before = r.snapshot().devices[0]
    assert before.used_bytes > 0
    assert agent.proc is not None
    agent.proc.send_signal(signal.SIGKILL)
    t0 = time.monotonic()
    agent.proc.wait(60)  # the kernel detaches its uprobes on the way out
    print(f"agent gone {time.monotonic() - t0:.1f} s after SIGKILL")
    n = len(agent.events())
    agent.start()
    agent.wait_event(lambda e: e.get("event") == "workload_adopted"
                     and e["workload"]["pod"] == "holder", timeout=30, after=n)
    deadline = time.monotonic() + 5.0  # several loops with the eBPF and NVML views
    while time.monotonic() < deadline:
        time.sleep(0.5)
        bad = [e for e in agent.events()[n:] if e.get("event") in ("violation", "action")
               and e.get("workload", {}).get("pod") == "holder"]
        assert not bad, bad
    live = stack.core().read_namespaced_pod("holder", stack.namespace)
    assert live.status.phase == "Running"
    assert not (live.status.container_statuses[0].state.terminated)
    with Region.open(region_of(stack, pod)) as r:
        after = r.snapshot().devices[0]
    assert (after.limit_bytes, after.used_bytes) == (before.limit_bytes, before.used_bytes)
    assert agent.metric("gpuwarden_workload_memory_limit_bytes", {"pod": "holder"}) == \
        800 * MIB
