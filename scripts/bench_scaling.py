"""The figures behind docs/scaling.md: store write rate, repo image distribution, weight sync.

    nice -n 10 .venv/bin/python scripts/bench_scaling.py store [--writes 400] [--writers 1,4] [--url URL]
    nice -n 10 .venv/bin/python scripts/bench_scaling.py images [--image selfplay-repo-toolz:TAG]
    nice -n 10 .venv/bin/python scripts/bench_scaling.py sync [--repeats 3]

store:  solver attempts (`TaskStore.record_attempt`, one transaction each, updating the task's statistics)
        per second, from W writer processes at once, each with its own store connection; SQLite in a temp
        dir unless --url names a PostgreSQL store (e.g. the URL `scripts/postgres.sh` prints).
images: a repo image's size, its `docker save` tarball size (uncompressed and gzip -1), and the time of
        `docker save IMG | docker load` into the same engine after tagging it under a scratch name
        (the layers exist already, so this is the lower bound of a pull: no network, no layer writes).
sync:   `HFPolicySync` into the embedded SmolLM2-135M: mode "memory" (copy a state dict in place) vs
        "disk" (save_pretrained, then load_weights), and the checkpoint's size on disk.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def store_writer(url: str, tasks: list[str], n: int, worker: int) -> None:
    from selfplay.store import open_store

    store = open_store(url)
    t0 = time.perf_counter()
    for j in range(n):
        store.record_attempt(tasks[(worker + j) % len(tasks)], role="solver", policy_version=0,
                             reward=1.0 if j % 3 == 0 else -1.0, turns=5, tokens=2000, termination="submitted",
                             run_id=f"bench-{worker}")
    print(time.perf_counter() - t0)


def bench_store(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "selfplay" / "store"))
    from store_data import make_artifact, make_report

    from selfplay.store import open_store

    tmp = tempfile.TemporaryDirectory()
    url = args.url or f"sqlite:///{tmp.name}/store.db"
    store = open_store(url)
    tasks = [store.record_validation(make_artifact(50_000 + i), "bench", make_report(n=i), origin="procedural")
             for i in range(16)]
    tasks = [t for t in tasks if t]
    print(f"store {store.engine.dialect.name}: {len(tasks)} tasks, {args.writes} solver attempts per writer")
    for w in [int(x) for x in args.writers.split(",")]:
        procs = [subprocess.Popen([sys.executable, __file__, "_writer", url, ",".join(tasks), str(args.writes), str(i)],
                                  stdout=subprocess.PIPE, text=True) for i in range(w)]
        t0 = time.perf_counter()
        walls = [float(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - t0
        print(f"  {w} writer(s): {w * args.writes / max(walls):7.1f} attempts/s in all "
              f"({args.writes / statistics.median(walls):6.1f}/s per writer; {wall:.1f} s with process start)")


def bench_images(args: argparse.Namespace) -> None:
    image = args.image
    size = int(subprocess.run(["docker", "image", "inspect", image, "--format", "{{.Size}}"], check=True,
                              capture_output=True, text=True).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        tar = Path(tmp) / "image.tar"
        t0 = time.perf_counter()
        subprocess.run(["docker", "save", "-o", str(tar), image], check=True)
        save_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run(f"gzip -1 -c {tar} > {tar}.gz", shell=True, check=True)
        gzip_s = time.perf_counter() - t0
        print(f"{image}: {size / 1e6:.0f} MB; docker save {tar.stat().st_size / 1e6:.0f} MB in {save_s:.1f} s; "
              f"gzip -1 {Path(str(tar) + '.gz').stat().st_size / 1e6:.0f} MB in {gzip_s:.1f} s")
    scratch = "selfplay-bench-scaling:load"
    subprocess.run(["docker", "tag", image, scratch], check=True)
    try:
        t0 = time.perf_counter()
        subprocess.run(f"docker save {image} | docker load", shell=True, check=True, capture_output=True)
        print(f"  docker save | docker load: {time.perf_counter() - t0:.1f} s")
    finally:
        subprocess.run(["docker", "rmi", scratch], check=False, capture_output=True)


def bench_sync(args: argparse.Namespace) -> None:
    from agent_scaffold.policies.hf import HFPolicy
    from selfplay.learner.weight_sync import HFPolicySync

    policy = HFPolicy()
    state = {k: v.detach().clone() for k, v in policy.model.state_dict().items()}
    params = sum(v.numel() for v in state.values())
    memory, disk = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            t0 = time.perf_counter()
            HFPolicySync(policy, "memory").push(2 * r + 1, state_dict=state)
            memory.append(time.perf_counter() - t0)
            ckpt = Path(tmp) / f"v{r}"
            t0 = time.perf_counter()
            policy.save_pretrained(ckpt)
            HFPolicySync(policy, "disk").push(2 * r + 2, checkpoint_dir=ckpt)
            disk.append(time.perf_counter() - t0)
        size = sum(f.stat().st_size for f in ckpt.iterdir())
    print(f"SmolLM2-135M fp32 ({params / 1e6:.0f}M parameters), checkpoint {size / 1e6:.0f} MB")
    print(f"  HFPolicySync memory: median {statistics.median(memory):.2f} s")
    print(f"  HFPolicySync disk (save_pretrained + load_weights): median {statistics.median(disk):.2f} s")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_writer":
        url, tasks, n, worker = sys.argv[2:6]
        store_writer(url, tasks.split(","), int(n), int(worker))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("store")
    s.add_argument("--writes", type=int, default=400)
    s.add_argument("--writers", default="1,4")
    s.add_argument("--url", default=None)
    i = sub.add_parser("images")
    i.add_argument("--image", default="selfplay-repo-toolz:42900c9d6e23")
    y = sub.add_parser("sync")
    y.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    {"store": bench_store, "images": bench_images, "sync": bench_sync}[args.what](args)


if __name__ == "__main__":
    main()
