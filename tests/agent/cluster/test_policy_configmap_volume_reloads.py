"""A policy ConfigMap mounted as a volume: the kubelet writes each version into a hidden
timestamped folder, points `..data` at it and swaps that link atomically; the visible files are
links through `..data`. The agent's watcher must load it and follow each swap, keeping the last
good policy when an edit is invalid."""

from testbed.volumes import ConfigMapVolume

from agent.reload import PolicyWatcher

GOOD = """version 1
defaults {
  gpumem = %dMiB
}
"""


class Clock:
    t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def limit_mib(policy) -> int:
    from policy.model import Workload

    return policy.evaluate(Workload(namespace="a", name="p", container="c")).gpumem_mib


def test_configmap_volume_swaps_are_reloaded_and_bad_edits_keep_the_last_good(tmp_path):
    vol = ConfigMapVolume(tmp_path)
    vol.write({"cluster.gwp": GOOD % 3000})
    w = PolicyWatcher([str(tmp_path)], interval=0.5, clock=Clock())
    assert limit_mib(w.load_initial()) == 3000

    vol.write({"cluster.gwp": GOOD % 1500})
    outcome = w.poll()
    assert outcome is not None and outcome.ok, outcome
    assert limit_mib(w.policy) == 1500 and w.reloads_total == 1

    vol.write({"cluster.gwp": "version 1\ndefaults { gpumem = lots }\n"})
    outcome = w.poll()
    assert outcome is not None and not outcome.ok
    assert "cluster.gwp" in outcome.message
    assert limit_mib(w.policy) == 1500 and w.reload_errors_total == 1

    assert w.poll() is None  # nothing changed since: no reload, no error
