"""Whether a warm start's demonstrations train on the same tokens when collected again: collects the default
warm start's demonstrations (seeds from the seed cache) `--runs` times into temporary directories and prints
each collection's content key, computed as a build computes it (docs/warm_start.md).

    SELFPLAY_CACHE=<cache with the seeds> .venv/bin/python scripts/check_content_key.py [--runs 2]

Exit status 1 when the keys differ.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from selfplay.demos.warm_start import content_key, training_content
from selfplay.demos.warm_start_config import WarmStartConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="Collections to compare.")
    args = ap.parse_args()
    config = WarmStartConfig()
    keys = []
    for i in range(args.runs):
        root = Path(tempfile.mkdtemp(prefix=f"content-key-{i}-"))
        *_, samples, steps = training_content(config, root)
        keys.append(content_key(samples, steps))
        print(f"collection {i}: {len(samples)} samples, content key {keys[-1]} ({root})", flush=True)
    print("same" if len(set(keys)) == 1 else "different")
    raise SystemExit(0 if len(set(keys)) == 1 else 1)


if __name__ == "__main__":
    main()
