"""Time of the tamper screen (`selfplay.judge.tamper.screen`) with and without string folding, in process.

Usage: python scripts/bench_screen.py [--repeats 7] [FILE.py ...]

The inputs: every prediction of the solver attack corpus (tests/fixtures/attacks/solver), and each FILE as
a new-file diff (a large prediction; default: five modules of the installed `rich` package, which the screen
reads to the end). Prints the median over repeats of each set's total time, folding on and off, and the
ratio; the verdicts must be the same except where folding flags a corpus attack.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def new_file_diff(path: Path) -> str:
    lines = path.read_text().splitlines()
    return (f"diff --git a/{path.name} b/{path.name}\nnew file mode 100644\n--- /dev/null\n+++ b/{path.name}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n" + "".join(f"+{line}\n" for line in lines))


def main() -> None:
    import rich

    from selfplay.judge import tamper

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("files", nargs="*", type=Path)
    args = ap.parse_args()
    files = args.files or [Path(rich.__file__).parent / f"{m}.py" for m in ("color", "segment", "table", "text",
                                                                            "_emoji_codes")]
    sets = {"attack corpus": [p.read_text() for p in sorted((HERE / "tests/fixtures/attacks/solver").glob("*.diff"))],
            "large new files": [new_file_diff(f) for f in files]}
    folding = tamper.StringFolder.strings
    for name, diffs in sets.items():
        times: dict[str, list[float]] = {"on": [], "off": []}
        verdicts: dict[str, list[str | None]] = {}
        for _ in range(args.repeats):
            for mode in ("off", "on"):
                tamper.StringFolder.strings = folding if mode == "on" else (lambda self, source: iter(()))
                start = time.perf_counter()
                verdicts[mode] = [tamper.screen(d) for d in diffs]
                times[mode].append(time.perf_counter() - start)
        tamper.StringFolder.strings = folding
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        changed = sum(a != b for a, b in zip(verdicts["on"], verdicts["off"]))
        print(f"{name} ({len(diffs)} diffs, {sum(d.count(chr(10)) for d in diffs):,} lines): folding on "
              f"{on * 1000:.1f} ms, off {off * 1000:.1f} ms, ratio {on / off:.2f} (median of {args.repeats}); "
              f"verdicts changed by folding: {changed}")


if __name__ == "__main__":
    main()
