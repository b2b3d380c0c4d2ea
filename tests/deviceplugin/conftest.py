"""A device plugin served on unix sockets beside a stand-in kubelet, with fake GPUs and an
in-memory cluster (no kubelet, no API server)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator

import pytest
from standin import Bed, FakeCluster, StandinKubelet, short_dir, two_gpus

from deviceplugin.server import DevicePlugin, PluginOptions, PodResourcesClient
from gpuwarden.config import Settings


@pytest.fixture
def make_bed() -> Iterator[Callable[..., Bed]]:
    made: list[Bed] = []

    def make(settings: Settings | None = None, pod_resources: bool = False) -> Bed:
        d = short_dir()
        plugin_dir = d / "dp"
        plugin_dir.mkdir()
        regions = d / "regions"
        settings = settings or Settings(region_root=str(regions))
        kubelet = StandinKubelet(plugin_dir).start()
        cluster, inventory = FakeCluster(), two_gpus()
        opts = PluginOptions(node="node-a", plugin_dir=plugin_dir, libvgpu="/opt/libvgpu.so",
                             health_seconds=0.05, watch_seconds=0.05,
                             maintenance_seconds=3600, pod_resources_socket=d / "podres.sock")
        podres = PodResourcesClient(d / "podres.sock", settings.resource_names.gpu) \
            if pod_resources else None
        plugin = DevicePlugin(settings, opts, inventory, cluster, podres,
                              log=lambda _m: None).start()
        _, stub = kubelet.dial(opts.socket_name)
        bed = Bed(d, kubelet, plugin, cluster, inventory, stub, regions)
        made.append(bed)
        return bed

    yield make
    for b in made:
        b.plugin.stop()
        b.kubelet.stop()
        shutil.rmtree(b.dir, ignore_errors=True)
