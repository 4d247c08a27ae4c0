"""Where the runtime's OpenMP team runs and how it waits, as `isomer run --bench` and
the Python module choose them (runtime.h, runtime/one_cpu_per_thread.h): isomer's
short spin comes with the team pinned one thread per CPU, a busy machine gets
passive waits, and the user's policy and placement win. Decisions only, no timings."""
import json
import os
import subprocess
import sys

import pytest

import isomer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ISOMER = os.environ.get("ISOMER_BIN", "build/isomer")
DEMO = os.path.join(REPO, "examples", "demo.onnx")
# What sets or reports the waits and the placement (this process's import of isomer set some).
VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "ISOMER_OMP_REEXEC", "ISOMER_MODULE_GOMP_SPINCOUNT",
        "ISOMER_MODULE_OMP_WAIT_POLICY", "ISOMER_MODULE_OPENMP_WHY", "ISOMER_RUNNABLE_TASKS", "OMP_PROC_BIND",
        "OMP_PLACES", "GOMP_CPU_AFFINITY")
BASE = {k: v for k, v in os.environ.items() if k not in VARS}
CPUS = sorted(os.sched_getaffinity(0))
ONE_PER_CPU = f"2 threads, one per CPU ({CPUS[0]}, {CPUS[-1] if len(CPUS) < 2 else CPUS[1]})"
NOT_SPIN = "not pinned (the OpenMP waits are not isomer's short spin)"

pytestmark = pytest.mark.skipif(len(CPUS) < 2, reason="one CPU: one thread, nothing to place")


@pytest.mark.skipif(not os.path.exists(ISOMER), reason=f"{ISOMER} not built")
def test_run_bench_pins_its_short_spin_and_keeps_the_users_choices(tmp_path):
    def run(env):
        report = str(tmp_path / "r.json")
        p = subprocess.run([ISOMER, "run", DEMO, "--bench", "--repeat", "2", "--warmup", "1", "--threads", "2",
                            "--report-json", report, "--no-onnxruntime"], capture_output=True, text=True,
                           timeout=120, env={**BASE, **env})
        assert p.returncode == 0, p.stderr
        r = json.load(open(report))
        assert "OpenMP threads: " + r["openmp_threads"] in p.stdout, p.stdout
        return r["openmp_waits"], r["openmp_threads"]

    waits, threads = run({"ISOMER_RUNNABLE_TASKS": "0"})
    assert waits.startswith("spin 1000 (0 other") and threads == ONE_PER_CPU, (waits, threads)
    # The user's placement wins: OMP_PROC_BIND=false keeps the team where the scheduler puts it.
    assert run({"ISOMER_RUNNABLE_TASKS": "0", "OMP_PROC_BIND": "false"})[1] == \
        "not pinned (OMP_PROC_BIND set by the user)"
    assert run({"ISOMER_RUNNABLE_TASKS": "0", "GOMP_CPU_AFFINITY": "0-1"})[1] == \
        "not pinned (GOMP_CPU_AFFINITY set by the user)"
    # A busy machine sleeps at barriers: nothing spins, nothing to pin.
    waits, threads = run({"ISOMER_RUNNABLE_TASKS": str(len(CPUS))})
    assert waits.startswith("passive (") and threads == NOT_SPIN, (waits, threads)
    # The user's spin is the user's: the team stays unpinned.
    assert run({"GOMP_SPINCOUNT": "1000"}) == ("GOMP_SPINCOUNT=1000 (set by the user)", NOT_SPIN)


def in_a_child(code, env):
    """The last lines `code` prints in a Python that imports isomer afresh under `env`."""
    env = {**BASE, **env}
    # The child imports the module this process imported (conftest puts the build's
    # python/ on sys.path, not on PYTHONPATH).
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(isomer.__file__))] +
                                        [p for p in [env.get("PYTHONPATH")] if p])
    p = subprocess.run([sys.executable, "-c", "import isomer; " + code], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout.splitlines()


def module_benchmark(env):
    code = ("r = isomer.benchmark(%r, threads=2, repeat=2, warmup=1); "
            "print(r['openmp_waits']); print(r['openmp_threads'])" % DEMO)
    return tuple(in_a_child(code, env)[-2:])


def test_python_module_chooses_the_waits_by_the_cli_rule():
    module = "set by isomer's Python module, on import"
    # Free cores: the short spin, with the team pinned one thread per CPU for the runs.
    assert module_benchmark({"ISOMER_RUNNABLE_TASKS": "0"}) == \
        (f"GOMP_SPINCOUNT=1000 ({module}: 0 other runnable tasks, {len(CPUS)} CPUs)", ONE_PER_CPU)
    # Other tasks runnable on import: passive waits (a spin was 2-5x slower there).
    assert module_benchmark({"ISOMER_RUNNABLE_TASKS": "3"}) == \
        (f"OMP_WAIT_POLICY=PASSIVE ({module}: 3 other runnable tasks, {len(CPUS)} CPUs)", NOT_SPIN)
    # The user's policy and placement are kept.
    assert module_benchmark({"OMP_WAIT_POLICY": "active", "ISOMER_RUNNABLE_TASKS": "0"}) == \
        ("OMP_WAIT_POLICY=active (set by the user)", NOT_SPIN)
    assert module_benchmark({"ISOMER_RUNNABLE_TASKS": "0", "OMP_PLACES": "cores"})[1] == \
        "not pinned (OMP_PLACES set by the user)"


def test_python_module_names_its_own_openmp_waits():
    """Where the user chose no policy, the guard's report says the module set it, not the user."""
    code = "_, r = isomer.optimize(%r, threads=1, cost='none', guard_target_only=True); print(r.guard_openmp_waits)"
    assert in_a_child(code % DEMO, {"ISOMER_RUNNABLE_TASKS": "0"})[-1] == \
        f"GOMP_SPINCOUNT=1000 (set by isomer's Python module, on import: 0 other runnable tasks, {len(CPUS)} CPUs)"
