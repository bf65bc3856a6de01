"""Suite jobs: running an artifact's test_script.sh in a repo sandbox and its test_parser.py in a parser
box, hardened against the code under test. The one engine that validation, grading, higher-order tasks and
procedural seeding share (`suite_run` says how a job runs; `job` builds its script; `suite_limits` holds the
limits validation and grading each configure)."""

from selfplay.jobs.job import MAX_TEST_OUTPUT, NO_BYTECODE, SCRATCH, Job, git_env_line
from selfplay.jobs.staging import check, prepare, restore_paths, stage, staged_files
from selfplay.jobs.suite_limits import SuiteLimits
from selfplay.jobs.suite_run import (
           Collected,
           SuiteRun,
           exec_job,
           exec_verification,
           parse_collected,
           parse_verification,
           run_job,
           run_suite,
           verify_run,
)

__all__ = ["MAX_TEST_OUTPUT", "NO_BYTECODE", "SCRATCH", "Collected", "Job", "SuiteLimits", "SuiteRun", "check",
           "exec_job", "exec_verification", "git_env_line", "parse_collected", "parse_verification", "prepare", "restore_paths", "run_job", "run_suite",
           "stage", "staged_files", "verify_run"]
