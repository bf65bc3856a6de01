"""Names of the loss aggregation modes, importable without torch (config validation uses them)."""

AGG_MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm")
