r"""Write the artifact kit for the move-on's worst case on one file, and print the command that times it.

The store's view (`rollout.kit_store_view`) with the move-on (`rollout.kit_next_function`) makes
`mutate NAME` scan the file's functions until one has a change on no stored line. Here every function's
changes are stored but the last one's, so `mutate FIRST` scans them all, as the kit does inside a sandbox
(the same script, run by the same interpreter). The kit is built from the checkout this script is run
from, so two checkouts give an A/B pair:

    python scripts/bench_kit_scan.py --repo DIR --file more_itertools/more.py \
        --test-file more_itertools/tests/test_more.py --out /tmp/scan/new
    cd DIR && python /tmp/scan/new/kit.py mutate FIRST

`--repo` must be a git checkout (the kit reads the committed file); nothing in it is changed by the
listing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent_scaffold.artifact_kit import KitView, kit_source
from agent_scaffold.mutation_operators import FileChanges


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, required=True, help="A git checkout of the repo (the kit's cwd).")
    ap.add_argument("--file", required=True, help="The code file, relative to --repo.")
    ap.add_argument("--test-file", required=True, help="Its oracle test file (test_files.txt), relative to --repo.")
    ap.add_argument("--out", type=Path, required=True, help="Where kit.py and its artifact directory go.")
    ap.add_argument("--share", default=None, help="K/N: a stride share (`rollout.kit_spread`).")
    args = ap.parse_args()
    source = (args.repo / args.file).read_text()
    changes = FileChanges(source)
    names = changes.names
    every = {n: changes.of(n) for n in names}
    changed = [n for n in names if every[n]]
    keep = changed[-1]  # the one function left with a fresh change: the scan reaches it last
    kept = {line for m in every[keep] for line in range(m.line, m.last + 1)}
    stored = sorted({(args.file, line) for n in changed if n != keep for m in every[n]
                     for line in range(m.line, m.last + 1)} - {(args.file, line) for line in kept})
    share = tuple(int(x) for x in args.share.split("/")) if args.share else None
    art = args.out / "art"
    art.mkdir(parents=True, exist_ok=True)
    (art / "test_files.txt").write_text(args.test_file + "\n")
    (args.out / "kit.py").write_text(kit_source(str(art), KitView(tuple(stored), True, share)))
    print(json.dumps({"functions": len(names), "with_changes": len(changed),
                      "changes": sum(len(v) for v in every.values()), "stored_lines": len(stored),
                      "first": changed[0], "kept": keep,
                      "command": f"cd {args.repo} && python {args.out / 'kit.py'} mutate {changed[0]}"}))


if __name__ == "__main__":
    main()
