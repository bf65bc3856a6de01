"""Every repo of the bundled default list builds and its whole suite passes in its image, run through a
real sandbox. Images are reused by content hash, so only the first CI run on a machine pays the builds."""

from __future__ import annotations

import re

import pytest

from repos.listfile import load_repo_list

SPECS = load_repo_list()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_default_repo_suite_passes_in_its_image(spec):
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image

    image = repo_image(spec)
    with DockerSandbox.create(image, workdir=spec.workdir, run_id="pytest-default-repos") as sb:
        result = sb.exec(spec.test_command, timeout=600)
        assert sb.diff() == "", "running the suite must leave the repo clean"
    summary = result.output.strip().splitlines()[-1] if result.output.strip() else ""
    assert result.ok, f"{spec.name}: exit {result.exit_code}\n{result.output[-3000:]}"
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 50, summary
    assert not re.search(r"\d+ (failed|errors?)\b", summary), summary
