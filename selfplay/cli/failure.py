"""How the `selfplay` command ends on an exception that no command turned into an exit code itself.

A user's mistake (a bad path, an unreachable store, a missing extra) raises one of the project's errors,
whose message names the input and the fix: it is printed as one `error:` line and the command exits 2, with
no traceback. Anything else is a bug: one line says so and how to see the traceback (`--debug`), exit 1.
With `--debug` (or `-v`) every exception keeps its traceback.
"""

from __future__ import annotations

import sys

from repos.errors import SelfPlayError

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
EXTRA_HINT = "selfplay-swe["
"""Our ImportErrors for a missing optional extra name it as `pip install 'selfplay-swe[extra]'`."""


def exit_code(exc: BaseException) -> int:
    """The exit code a command ends with on `exc` (see the module docstring)."""
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, SelfPlayError):
        return EXIT_USAGE
    if isinstance(exc, ImportError) and EXTRA_HINT in str(exc):
        return EXIT_USAGE
    return EXIT_FAILED


def message(exc: BaseException) -> str:
    """The one line printed for `exc`."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, SelfPlayError) or (isinstance(exc, ImportError) and EXTRA_HINT in str(exc)):
        return f"error: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"error: {exc.filename}: {exc.strerror or exc} (rerun with --debug for the traceback)"
    return (f"error: {exc.__class__.__name__}: {exc} (an unexpected failure; rerun with --debug for the "
            "traceback, and report it)")


def print_error(message: str) -> None:
    """Print `error: message` on stderr. The message is shown as written: paths, artifact text and config
    names carry square brackets (`[defaults]`, `run[1]`) that Rich would otherwise read as markup and drop."""
    from rich.console import Console
    from rich.text import Text

    line = Text("error:", style="red")
    line.append(f" {message}")
    Console(stderr=True).print(line, highlight=False, soft_wrap=True)


def fail(exc: BaseException) -> None:
    """Print `exc` as one line on stderr and exit with its code."""
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text(message(exc), style=None), highlight=False, soft_wrap=True)
    sys.exit(exit_code(exc))
