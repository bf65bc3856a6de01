"""The run configuration: `RunConfig`, a tree of frozen dataclasses (`run_config`), its presets (`presets/`),
loading with dotted overrides and checks (`loader`), YAML round trips (`yaml_io`), references to files and
environment values (`refs`) and the generated reference of docs/config.md (`reference`).

Every layer reads it (the loop, the rollout workers, the learner, the CLI), so it sits apart from all of them.
"""
