"""`ThreadGovernor`: the sampler's torch threads follow the cores other processes leave free.

The rule (`threads_for`) is pure. The governor is tested twice: with a documented test double for the CPU
counters (`_Counters`, a scripted sequence of `CpuTimes`), so the decision does not depend on this machine's
load, and with the real `/proc` reader against a real busy loop in another process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")

from agent_scaffold.policies.cpu_threads import CpuTimes, ThreadGovernor, read_cpu_times, threads_for  # noqa: E402


@pytest.mark.parametrize(("cores", "others", "ceiling", "want"), [
    (2, 0.0, 2, 2), (2, 0.4, 2, 2), (2, 0.6, 2, 1), (2, 1.0, 2, 1), (2, 2.0, 2, 1), (2, 5.0, 2, 1),
    (16, 3.2, 8, 8), (16, 12.0, 8, 4), (16, 0.0, 1, 1)])
def test_threads_follow_the_free_cores(cores, others, ceiling, want):
    assert threads_for(cores, others, ceiling) == want


class _Counters:
    """Test double for `read_cpu_times`: each call advances the clock by `window` seconds, during which
    other processes were busy for the next load in `loads` (in cores) and this process for `own`."""

    def __init__(self, loads, own=1.0, window=1.0, ticks_per_s=100):
        self.loads, self.own, self.window, self.tps = list(loads), own, window, ticks_per_s
        self.t = CpuTimes(0, 0, time.monotonic() - 10)

    def __call__(self):
        others = self.loads.pop(0) if self.loads else 0.0
        own = int(self.own * self.window * self.tps)
        self.t = CpuTimes(self.t.busy + own + int(others * self.window * self.tps), self.t.own + own,
                          self.t.wall + self.window)
        return self.t


def _governor(loads, **kw):
    gov = ThreadGovernor(ceiling=2, reader=_Counters([0.0, *loads]), cores=2, window_s=0.0, **kw)
    gov._ticks_per_s = 100
    return gov


def _in_thread(fn):
    """Run `fn` on a fresh thread (as the continuous-batching worker does) and return its result."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_a_busy_core_drops_the_sampling_thread_to_one_and_a_free_one_restores_two():
    gov = _governor([1.0, 0.1, 0.8, 0.0])
    seen = _in_thread(lambda: [(gov.update(), torch.get_num_threads()) for _ in range(4)])
    assert seen == [(1, 1), (2, 2), (1, 1), (2, 2)]
    assert gov.others_busy == pytest.approx(0.0)


def test_only_the_sampling_thread_is_governed():
    main = torch.get_num_threads()
    gov = _governor([2.0])
    assert _in_thread(lambda: (gov.update(), torch.get_num_threads())) == (1, 1)
    assert torch.get_num_threads() == main  # a learner step on another thread keeps its count


def test_a_fixed_count_ignores_the_load():
    gov = ThreadGovernor(ceiling=1, adapt=False, reader=_Counters([0.0, 0.0]), cores=2)
    assert _in_thread(lambda: (gov.update(), torch.get_num_threads())) == (1, 1)


def test_unreadable_counters_leave_torch_alone():
    def broken():
        raise OSError("no /proc here")

    gov = ThreadGovernor(ceiling=2, reader=broken, cores=2, window_s=0.0)
    assert _in_thread(gov.update) == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_ceiling_is_named(bad):
    with pytest.raises(ValueError, match="thread ceiling"):
        ThreadGovernor(ceiling=bad)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_real_counters_see_a_busy_loop_in_another_process():
    """The real reader: a busy loop in a child process shows up as about one core of other processes' load,
    and this process's own spinning does not."""
    first = read_cpu_times()
    assert first.busy >= 0 and first.own >= 0
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        gov = ThreadGovernor(ceiling=2, window_s=0.0)
        time.sleep(1.5)
        gov.update()
    finally:
        hog.kill()
        hog.wait()
    assert gov.others_busy >= 0.6, gov.others_busy  # the loop's core (more if the machine is loaded)
    later = read_cpu_times()
    assert later.busy >= first.busy and later.own >= first.own and later.wall > first.wall


def test_hf_policy_rejects_a_bad_thread_count(tmp_path):
    pytest.importorskip("transformers")
    from agent_scaffold.policies.hf import HFPolicy
    from selfplay.learner.tiny_model import save_tiny_model

    model = save_tiny_model(tmp_path / "tiny")
    with pytest.raises(ValueError, match="cpu_threads"):
        HFPolicy(model, cpu_threads=-1)
    assert HFPolicy(model, cpu_threads=1).threads.ceiling == 1
    assert HFPolicy(model).threads.adapt is False  # off by default: no gain measured in a run
    assert HFPolicy(model, adapt_threads=True).threads.adapt is True


def test_the_run_config_names_a_negative_thread_count():
    from selfplay.config.run_config import PolicyConfig, RunConfig

    with pytest.raises(ValueError, match="policy.cpu_threads"):
        RunConfig(policy=PolicyConfig(cpu_threads=-2))
    assert RunConfig().policy.cpu_threads == 0 and RunConfig().policy.adapt_threads is False
