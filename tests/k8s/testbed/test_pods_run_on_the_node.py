"""Pods run for real on the test bed's node: busybox from the locally built image, a
dynamically linked C program in an image built from host files (with its libraries), and a
hostPath volume the container writes to."""

from __future__ import annotations

from pathlib import Path

import pytest
from cprog import compile_c
from testbed import images
from testbed.kube import core, pod_manifest, wait_pod_phase

pytestmark = pytest.mark.k8s

HELLO_C = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *libc = dlopen("libc.so.6", RTLD_NOW);
    printf("hello from %s, argc=%d, dlopen(libc)=%s\n", argv[0], argc, libc ? "ok" : dlerror());
    return libc ? 0 : 3;
}
"""


def test_busybox_pod_runs_and_its_output_is_read(k8s_api, k8s_node, k8s_namespace) -> None:
    pod = pod_manifest("echo", images.BUSYBOX_IMAGE, ["sh", "-c", "echo hi from $(hostname)"],
                       node_name=k8s_node.name)
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    done = wait_pod_phase(k8s_api, k8s_namespace, "echo")
    assert done.status.phase == "Succeeded"
    assert k8s_node.container_log(done) == "hi from echo\n"
    assert done.spec.node_name == k8s_node.name


def test_failing_container_reports_its_exit_code_and_output(
        k8s_api, k8s_node, k8s_namespace) -> None:
    pod = pod_manifest("fails", images.BUSYBOX_IMAGE, ["sh", "-c", "echo broken >&2; exit 7"],
                       node_name=k8s_node.name)
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    done = wait_pod_phase(k8s_api, k8s_namespace, "fails")
    assert done.status.phase == "Failed"
    term = done.status.container_statuses[0].state.terminated
    assert (term.exit_code, term.message.strip()) == (7, "broken")


def test_dynamically_linked_c_program_runs_in_a_built_image(
        k8s_api, k8s_node, k8s_namespace, tmp_path: Path) -> None:
    src = tmp_path / "hello.c"
    src.write_text(HELLO_C)
    exe = compile_c(src, tmp_path / "bin")
    assert images.elf_dependencies(exe), "the test program must be dynamically linked"
    image = images.build_image(tmp_path / "img", "gpuwarden.test/hello:1",
                               {"/app/hello": exe}, with_busybox=False)
    k8s_node.import_image(image)
    pod = pod_manifest("hello", image.ref, ["/app/hello", "x"], node_name=k8s_node.name)
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    done = wait_pod_phase(k8s_api, k8s_namespace, "hello")
    assert k8s_node.container_log(done) == "hello from /app/hello, argc=2, dlopen(libc)=ok\n"
    assert done.status.phase == "Succeeded"


def test_container_writes_to_a_host_path(k8s_api, k8s_node, k8s_namespace,
                                         tmp_path: Path) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    pod = pod_manifest("writer", images.BUSYBOX_IMAGE,
                       ["sh", "-c", "echo $((6*7)) > /out/answer"], node_name=k8s_node.name,
                       volumeMounts=[{"name": "out", "mountPath": "/out"}])
    pod["spec"]["volumes"] = [{"name": "out", "hostPath": {"path": str(out)}}]
    core(k8s_api).create_namespaced_pod(k8s_namespace, pod)
    assert wait_pod_phase(k8s_api, k8s_namespace, "writer").status.phase == "Succeeded"
    assert (out / "answer").read_text() == "42\n"
