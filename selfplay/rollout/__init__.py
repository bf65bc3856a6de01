"""The rollout side of a run: an `EpisodeRequest` in, an `EpisodeResult` out.

| Module | Defines |
|---|---|
| `requests` | `EpisodeRequest`, `EpisodeResult`, the `RequestRunner` protocol |
| `worker` | `Worker` (`build_runner`): episodes in pooled sandboxes, then validation or grading |
| `policy_factory` | `policy_source`: the rollout policy of each backend (hf, vllm, openai, scripted) |
| `executor` | `LocalExecutor`: requests on local threads |
| `ray_executor` | `RayExecutor`: requests on Ray actors (the `dist` extra) |

The loop (`selfplay.orchestration`) makes the requests and records the results.
"""
