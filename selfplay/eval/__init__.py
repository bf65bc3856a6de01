"""Evaluation on SWE-bench (Verified, the fixed verified-50 subset, any SWE-bench-format file, our own
exported tasks) through the same scaffold and policy backends as training, graded by the swebench package.

| Module | Defines |
|---|---|
| `dataset` | `load_instances` (hub or local file via `datasets`), `normalise`, `image_name`, `verified_50` |
| `guard` | `strip_history` / `history_leaks`: nothing after base_commit is left in the repo |
| `task_image` | task images for our tasks (`build_task_image`, `ensure_instance_image`) |
| `predictions` | `Prediction` and the harness JSONL |
| `swebench_grading` | `grade_local`: swebench's grading functions on a log from our sandbox |
| `harness` | the official `swebench.harness.run_evaluation` and its reports |
| `report` | `EvalReport`: resolved % per run, mean ± stderr, pass@K, per-instance table |
| `runner` | `evaluate`, `EvalConfig` |
| `offline` | the offline dataset built from fixture tasks on the bundled repos |

swebench is imported lazily (it pulls in docker, datasets and modal), only where grading needs it.
"""
