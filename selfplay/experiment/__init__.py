"""The learning experiment: the same self-play loop from the same warm start at LR > 0 and at LR = 0 (the
control), both measured on held-out tasks that fed no demonstration, SFT or RL step
(`scripts/bench_learning.py --arm rl`)."""
