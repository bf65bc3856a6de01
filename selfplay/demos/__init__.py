"""Scripted experts that make demonstrations for the warm start (`selfplay demos`, `selfplay rft`).

`solver_plan` (pure) plans a solver episode from a procedural task's known bug; `solver` runs it through
the real tools in a real sandbox and grades it; `injector` writes a procedural artifact as an injector
episode; `collect` seeds tasks, runs both experts and stores what passed; `warm_start` builds the cached
warm-start checkpoint from them, and `warm_start_config` holds its config, sizes and repo split.
"""
