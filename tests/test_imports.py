"""Importing the four packages (and the CLI) must not load any heavy optional dependency."""

import subprocess
import sys

HEAVY = ("torch", "vllm", "deepspeed", "ray", "transformers", "swebench")


def test_packages_import_without_heavy_dependencies():
    code = (
        "import sys, importlib\n"
        "for p in ('selfplay', 'sandboxes', 'agent_scaffold', 'repos', 'selfplay.cli'):\n"
        "    importlib.import_module(p)\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"heavy modules imported at package import: {out.stdout.strip()}"
