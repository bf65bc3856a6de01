"""The verdict on a solver's prediction and the rewards of both roles.

| Module | Defines |
|---|---|
| `verdict` | `GradeResult` and the pure grading: parser output -> status map -> verdict (no Docker) |
| `grader` | `grade`, `build_buggy_state`, `GraderConfig`: the Docker shell around the verdict |
| `tamper` | `screen`: the static screen of a prediction for runner tampering and environment probes |
| `rewards` | `solver_reward`, `injector_reward` (SSR Eq. 1), `RewardConfig` |
"""
