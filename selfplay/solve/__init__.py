"""`selfplay solve`: the trained agent on a real issue in a real repository.

| Module | Defines |
|---|---|
| `issue` | `read_issue`: issue text from a GitHub issue URL (GitHub API), a file or literal text |
| `checkout` | `Checkout`: a gitpython clone of a URL or of a local repository at a commit (the user's tree untouched) |
| `image` | `build_solve_image`: base image + the checkout at /testbed + a detected (or `--setup`) install |
| `branch` | `commit_to_branch`: the patch as a commit on a new local branch, built in a temporary index |
| `solver` | `solve`: the above in order, the solver episode, and a `SolveResult` summary |
"""
