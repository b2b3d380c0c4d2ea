"""Suite-wide markers: `bpf` tests need root, BCC and tracefs; `gpu` tests need a real NVIDIA GPU;
`k8s` tests need root and the Kubernetes binaries of KUBEBUILDER_ASSETS (the test bed in
tests/testbed).

A `bpf` test that cannot run skips with the reason, except where GPUWARDEN_REQUIRE_BPF=1 (CI),
where the same reason fails it: CI runs as root on a kernel with uprobes, so a skip there
would hide a broken install.  `k8s` tests do the same with GPUWARDEN_REQUIRE_K8S=1.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cudaprobe import CudaProbe

REPO = Path(__file__).resolve().parent.parent


def bpf_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "eBPF tests need root"
    try:
        import bcc  # noqa: F401
    except ImportError as err:
        return f"BCC's python bindings are missing ({err}); run scripts/setup.sh as root"
    if not Path("/sys/kernel/tracing/uprobe_events").exists():
        return "tracefs is not mounted on /sys/kernel/tracing (scripts/setup.sh mounts it)"
    if not Path(f"/lib/modules/{os.uname().release}/build").exists():
        return f"no kernel headers at /lib/modules/{os.uname().release}/build"
    return None


def gpu_unavailable_reason() -> str | None:
    if not Path("/dev/nvidiactl").exists():
        return "no NVIDIA GPU on this machine (/dev/nvidiactl is absent)"
    return None


def k8s_unavailable_reason() -> str | None:
    from testbed.assets import assets_unavailable_reason

    return assets_unavailable_reason()


def _k8s_node_users_last(items: list[pytest.Item]) -> None:
    """Move the modules whose tests use k8s_node to the end (in their order), so the node, and
    the machine-wide kubelet lock it holds, is up for one stretch of the session only."""
    users = {item.path for item in items if "k8s_node" in getattr(item, "fixturenames", ())}
    items[:] = ([i for i in items if i.path not in users] + [i for i in items if i.path in users])
    last = [i for i in items if "k8s_node" in getattr(i, "fixturenames", ())][-1:]
    _K8S_NODE_LAST_USER[0] = last[0].nodeid if last else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    bpf_reason = bpf_unavailable_reason()
    gpu_reason = gpu_unavailable_reason()
    require_bpf = os.environ.get("GPUWARDEN_REQUIRE_BPF") == "1"
    k8s_reason = k8s_unavailable_reason()
    require_k8s = os.environ.get("GPUWARDEN_REQUIRE_K8S") == "1"
    _k8s_node_users_last(items)
    for item in items:
        if "k8s" in item.keywords and k8s_reason:
            if require_k8s:
                item.add_marker(pytest.mark.usefixtures("_k8s_required_but_unavailable"))
            else:
                item.add_marker(pytest.mark.skip(reason=k8s_reason))
        if "bpf" in item.keywords and bpf_reason:
            if require_bpf:
                item.add_marker(pytest.mark.usefixtures("_bpf_required_but_unavailable"))
            else:
                item.add_marker(pytest.mark.skip(reason=bpf_reason))
        if "gpu" in item.keywords and gpu_reason:
            item.add_marker(pytest.mark.skip(reason=gpu_reason))


@pytest.fixture
def _bpf_required_but_unavailable() -> None:
    pytest.fail(f"GPUWARDEN_REQUIRE_BPF=1 but eBPF cannot run here: {bpf_unavailable_reason()}")


@pytest.fixture
def _k8s_required_but_unavailable() -> None:
    reason = k8s_unavailable_reason()
    pytest.fail(f"GPUWARDEN_REQUIRE_K8S=1 but the test bed cannot run here: {reason}")


# ---- the Kubernetes test bed (tests/testbed) -------------------------------------------------
# One control plane per session, started on first use; one node (containerd + kubelet) sharing
# it, also started on first use and stopped right after the last test that uses it, since it
# holds the machine-wide kubelet lock (the modules using it run last, together: see
# _k8s_node_users_last).  Each test gets its own namespace.
_K8S_NODE_LAST_USER: list[str | None] = [None]
_K8S_NODES: list = []


@pytest.fixture(scope="session")
def k8s_cluster() -> Iterator:
    """A ready testbed.ControlPlane (etcd, apiserver, scheduler, controller-manager)."""
    from testbed import ControlPlane

    cp = ControlPlane.start()
    yield cp
    cp.stop()


@pytest.fixture(scope="session")
def k8s_api(k8s_cluster):
    """A `kubernetes` ApiClient of a system:masters user on k8s_cluster."""
    from testbed.kube import api_client

    return api_client(k8s_cluster.admin_kubeconfig)


@pytest.fixture(scope="session")
def k8s_node(k8s_cluster) -> Iterator:
    """A Ready testbed.Node registered with k8s_cluster (pause and busybox images imported)."""
    from testbed import Node

    node = Node.start(k8s_cluster)
    _K8S_NODES.append(node)
    yield node
    node.stop()
    _K8S_NODES.remove(node)


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if item.nodeid == _K8S_NODE_LAST_USER[0]:
        for node in _K8S_NODES:
            node.stop()  # frees the kubelet lock for other sessions; the finalizer is a no-op


@pytest.fixture
def k8s_namespace(k8s_api) -> Iterator[str]:
    """A fresh namespace (its default ServiceAccount ready), deleted after the test."""
    from testbed.kube import create_namespace, delete_namespace

    name = create_namespace(k8s_api)
    yield name
    delete_namespace(k8s_api, name)


@pytest.fixture
def k8s_fake_node(k8s_api) -> Iterator[Callable[..., object]]:
    """Factory of nodes without a kubelet (testbed.kube.add_fake_node's arguments), deleted
    after the test."""
    from testbed.kube import add_fake_node, delete_node

    made: list[str] = []

    def make(name: str, capacity: dict[str, str], **kw: object) -> object:
        made.append(name)
        return add_fake_node(k8s_api, name, capacity, **kw)

    yield make
    for name in made:
        delete_node(k8s_api, name)


# ---- the CUDA test program (tests/progs/cudaprobe.c, driven through tests/cudaprobe.py) ------
@pytest.fixture(scope="session")
def cudaprobe(tmp_path_factory: pytest.TempPathFactory) -> CudaProbe:
    """The one CUDA test program, built on first use, once per session."""
    return CudaProbe(tmp_path_factory.mktemp("cudaprobe"))


# ---- the simulated GPU (libvgpu/sim) -------------------------------------------------------------
@dataclass(frozen=True)
class SimGpu:
    """A fresh simulated GPU: `env` is a full copy of os.environ with the sim's variables set
    (pass it to subprocesses), `state_path` its state file (created on first use)."""

    env: dict[str, str]
    state_path: Path


def _make_sim_gpu(tmp_path: Path, devices: int, memory: str, kernel_scale: float | None,
                  name: str, timeslice_us: int | None = None) -> SimGpu:
    from libvgpu.sim import sim_env

    state_path = tmp_path / name
    env = dict(os.environ)
    env.pop("GPUWARDEN_SIM_KERNEL_SCALE", None)
    env.update(sim_env(state_path, devices=devices, memory=memory, kernel_scale=kernel_scale,
                       timeslice_us=timeslice_us))
    return SimGpu(env=env, state_path=state_path)


@pytest.fixture
def sim_gpu(tmp_path: Path) -> SimGpu:
    """One simulated 80 GiB GPU, fresh per test."""
    return _make_sim_gpu(tmp_path, 1, "80GiB", None, "sim-gpu.state")


@pytest.fixture
def make_sim_gpu(tmp_path: Path) -> Callable[..., SimGpu]:
    """Factory for other shapes: make_sim_gpu(devices=2, memory="4GiB", kernel_scale=0.5,
    timeslice_us=2000)."""
    counter = iter(range(1_000_000))

    def make(devices: int = 1, memory: str = "80GiB", kernel_scale: float | None = None,
             timeslice_us: int | None = None) -> SimGpu:
        return _make_sim_gpu(tmp_path, devices, memory, kernel_scale, f"sim-{next(counter)}.state",
                             timeslice_us)

    return make
