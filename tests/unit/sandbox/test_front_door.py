"""The package's front door is lazy: what runs inside the sandbox loads none of the evaluator's side."""

import subprocess
import sys

import afm.sandbox


def test_every_exported_name_resolves():
    assert sorted(afm.sandbox.__all__) == sorted(afm.sandbox._EXPORTS)
    for name in afm.sandbox.__all__:
        assert getattr(afm.sandbox, name) is not None
    assert set(afm.sandbox.__all__) <= set(dir(afm.sandbox))


def test_the_modules_that_run_inside_load_no_evaluator_module():
    code = ("import sys, afm.sandbox.plain, afm.sandbox.channel, afm.sandbox.referee;"
            "print(' '.join(m for m in sys.modules if m.startswith('afm.sandbox.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    assert not {"afm.sandbox.run", "afm.sandbox.process", "afm.sandbox.cgroup"} & set(loaded), loaded
