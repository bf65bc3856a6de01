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


def test_the_cli_starts_without_sqlalchemy():
    """`selfplay --help` and every command's bad-argument error come before any store is opened: SQLAlchemy
    (~0.5 s of a ~1 s start) loads with the first `open_store`, not with the CLI or `selfplay.store`."""
    code = (
        "import sys\n"
        "import selfplay.cli, selfplay.store\n"
        "print('sqlalchemy' in sys.modules)\n"
        "selfplay.store.open_store\n"
        "print('sqlalchemy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"], out.stdout
