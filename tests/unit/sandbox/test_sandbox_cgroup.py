"""Per-run cgroups: what the probe reads from /proc, and on this host either a cgroup per
run (its limits written, nothing left behind) or the reason the bounds are per process."""

from __future__ import annotations

import os

import pytest

from afm.sandbox import SandboxPolicy, cgroup

PROC_CGROUP_V1 = """12:pids:/
4:memory:/process_api/abc
1:name=systemd:/
0::/
"""
MOUNTINFO = """31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 /kubepods/pod1 /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_proc_files_are_read_as_the_kernel_writes_them() -> None:
    own = cgroup.own_cgroups(PROC_CGROUP_V1)
    assert own == {"pids": "/", "memory": "/process_api/abc", "systemd": "/", "": "/"}
    mounts = cgroup.cgroup_mounts(MOUNTINFO)
    assert mounts == {"memory": ("/", "/sys/fs/cgroup/memory"), "pids": ("/", "/sys/fs/cgroup/pids"),
                      "": ("/kubepods/pod1", "/sys/fs/cgroup/unified")}
    assert cgroup.cgroup_dir(mounts["memory"], "/process_api/abc") == "/sys/fs/cgroup/memory/process_api/abc"
    assert cgroup.cgroup_dir(mounts[""], "/kubepods/pod1/app") == "/sys/fs/cgroup/unified/app"
    assert cgroup.cgroup_dir(mounts[""], "/elsewhere") is None  # outside what the mount shows


def test_switched_off_or_pointed_at_nothing_says_why(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(cgroup.ENV, "off")
    found = cgroup.probe()
    assert found.version == "none" and "switched off" in found.reason
    assert found.layer(SandboxPolicy()).startswith("per-process limits only")
    monkeypatch.setenv(cgroup.ENV, str(tmp_path / "missing"))
    found = cgroup.probe()
    assert found.version == "none" and "cannot read" in found.reason


def test_a_run_gets_its_own_cgroup_or_the_reason_it_cannot() -> None:
    found = cgroup.support()
    policy = SandboxPolicy(memory_bytes=300 << 20, max_processes=5)
    if found.version == "none":
        assert found.reason and "no cgroup" in found.layer(policy)
        assert cgroup.create(policy) is None
        return
    group = cgroup.create(policy)
    try:
        assert len(group.procs_fds()) == len(group.dirs) >= 1
        limit = "memory.max" if found.version == "v2" else "memory.limit_in_bytes"
        assert int(open(os.path.join(group.dirs[0], limit)).read()) == 300 << 20
        if found.pids_parent:
            assert open(os.path.join(group.dirs[-1], "pids.max")).read().strip() == str(5 + cgroup.EXTRA_TASKS)
    finally:
        dirs = list(group.dirs)
        group.close()
    assert not any(os.path.exists(d) for d in dirs)
    assert "per run: 300 MiB" in found.layer(policy)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
def test_no_run_cgroup_is_left_after_runs() -> None:
    from afm.sandbox import kernel_boundary, run_python

    found = cgroup.support()
    if found.version == "none" or kernel_boundary().kind != "kernel":
        pytest.skip(f"no cgroup per run here: {found.reason or kernel_boundary().reason}")
    before = set(os.listdir(found.memory_parent))
    result = run_python("import os\nif os.fork() == 0:\n    os.setsid()\n    import time\n    time.sleep(60)\n",
                        SandboxPolicy(tripwire=False))
    assert result.passed and any(layer.startswith("cgroup-") for layer in result.isolation)
    ours = f"{cgroup.RUN_PREFIX}{os.getpid()}-"  # other processes may be judging at the same time
    assert {d for d in set(os.listdir(found.memory_parent)) - before if d.startswith(ours)} == set()


def _tree(root, controllers: str, subtree: str, procs: str):
    """A directory laid out like a cgroup v2 directory (plain files: the decision logic only)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers + "\n")
    (root / "cgroup.subtree_control").write_text(subtree + "\n")
    (root / "cgroup.procs").write_text(procs)
    return root


def test_v2_needs_memory_and_a_cgroup_it_may_enable_it_in(tmp_path) -> None:
    no_memory = _tree(tmp_path / "a", "cpu io", "", "")
    assert "memory controller is not delegated" in cgroup._v2(str(no_memory), explicit=True).reason
    crowded = _tree(tmp_path / "b", "memory pids", "", "1\n2\n")
    found = cgroup._v2(str(crowded), explicit=False)
    assert found.version == "none" and "holds other processes" in found.reason and cgroup.ENV in found.reason
    assert (crowded / "cgroup.subtree_control").read_text().strip() == ""  # nothing was changed


def test_v2_alone_in_its_cgroup_moves_to_a_leaf_and_enables_what_is_delegated(tmp_path) -> None:
    alone = _tree(tmp_path / "c", "memory io", "", f"{os.getpid()}\n")
    found = cgroup._v2(str(alone), explicit=False)
    assert found.version == "v2" and found.memory_parent == str(alone) and found.pids_parent == ""
    assert (alone / "afm-evaluator" / "cgroup.procs").read_text() == "0"  # "0": this process
    assert (alone / "cgroup.subtree_control").read_text() == "+memory"
    ready = _tree(tmp_path / "d", "memory pids", "memory pids", "")
    assert cgroup._v2(str(ready), explicit=True) == cgroup.CgroupSupport("v2", "", str(ready), str(ready))
