"""Repo images: a real build of a tiny local package, reuse by content hash, and a broken entry failing
alone. The default repos' own images are checked in tests/repos/test_default_repos.py."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from repos.spec import RepoSpec
from sandboxes.image_build import HOST_CA_BUNDLE
from sandboxes.images import (
    BASE_IMAGE,
    build_repo_image,
    build_repo_images,
    content_hash,
    ensure_base_image,
)

PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "tinycalc"
version = "0.1"
"""


@pytest.fixture(scope="module")
def tiny_source(tmp_path_factory):
    root = tmp_path_factory.mktemp("tinycalc")
    (root / "tinycalc").mkdir()
    (root / "tinycalc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_add.py").write_text("from tinycalc import add\n\ndef test_add():\n"
                                                "    assert add(2, 3) == 5\n")
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


def tiny_spec(source, **changes) -> RepoSpec:
    spec = RepoSpec(name="selfplay-test-tinycalc", source="local", path=str(source),
                    install=("pytest==9.2.0",),
                    test_command="python -m pytest -q -p no:cacheprovider tests", env=(("TINY", "1"),))
    return dataclasses.replace(spec, **changes)


def test_content_hash_covers_spec_tree_and_base(tiny_source):
    spec = tiny_spec(tiny_source)
    first = content_hash(spec, tiny_source, "sha256:aaa")
    assert first == content_hash(spec, tiny_source, "sha256:aaa")
    assert first != content_hash(spec, tiny_source, "sha256:bbb")
    other = tiny_spec(tiny_source, install=("pytest==8.4.2",))
    assert first != content_hash(other, tiny_source, "sha256:aaa")
    # The test command runs in the image; changing it must not rebuild.
    assert first == content_hash(tiny_spec(tiny_source, test_command="pytest"), tiny_source, "sha256:aaa")


@pytest.mark.docker
@pytest.mark.slow
def test_build_then_reuse_by_content_hash(tiny_source, tmp_path):
    from sandboxes.docker import DockerSandbox
    from sandboxes.engine import docker_client

    assert ensure_base_image() == BASE_IMAGE
    spec = tiny_spec(tiny_source)
    built = build_repo_image(spec, rebuild=True, log_dir=tmp_path)
    assert built.ok and built.built and built.image.startswith("selfplay-repo-selfplay-test-tinycalc:")
    assert "Successfully installed" in built.log_path.read_text()
    config = docker_client().images.get(built.image).attrs["Config"]
    assert config["Labels"]["selfplay.repo"] == spec.name
    assert config["Env"][0].startswith("PATH=/opt/venv/bin:") and "TINY=1" in config["Env"]
    assert not config.get("Volumes"), "a build mount leaked into the image config"

    again = build_repo_image(spec, log_dir=tmp_path)
    assert (again.image, again.built) == (built.image, False)
    assert again.seconds < 5

    host_ca = hashlib.sha256(HOST_CA_BUNDLE.read_bytes()).hexdigest() if HOST_CA_BUNDLE.exists() else "-"
    with DockerSandbox.create(built.image, workdir=spec.workdir) as sb:
        checks = sb.exec("command -v python; command -v pytest; git status --porcelain; "
                         "git rev-parse HEAD selfplay-base; git config user.name; "
                         "ls /tmp/selfplay-host-ca.crt 2>&1; sha256sum /etc/ssl/certs/ca-certificates.crt",
                         timeout=60)
        lines = checks.output.splitlines()
        assert lines[:2] == ["/opt/venv/bin/python", "/opt/venv/bin/pytest"], checks.output
        assert lines[2] == lines[3], "HEAD must be the commit tagged selfplay-base (and the tree clean)"
        assert lines[4] == "selfplay"
        assert "No such file" in lines[5], "the host CA bundle must not stay in the image"
        assert host_ca not in lines[6]
        assert sb.exec(spec.test_command, timeout=120).ok
        # The repo sits on a size-limited tmpfs filled from the image's snapshot, owned by the agent uid.
        assert sb.mode == "tmpfs"
        assert sb.exec("stat -c %u . tinycalc/__init__.py; findmnt -no FSTYPE .").output.split() == \
            ["1000", "1000", "tmpfs"]
        # Editable install: a bug written into the workdir is what the tests import.
        sb.write_file("tinycalc/__init__.py", "def add(a, b):\n    return a - b\n")
        broken = sb.exec(spec.test_command, timeout=120)
        assert broken.exit_code == 1 and "1 failed" in broken.output


@pytest.mark.docker
@pytest.mark.slow
def test_broken_entry_fails_alone(tiny_source, tmp_path):
    broken = tiny_spec(tiny_source, name="selfplay-test-broken", install=("selfplay-no-such-package==9.9",))
    image_spec = RepoSpec(name="prebuilt", source="image", image=BASE_IMAGE)
    results = build_repo_images([broken, tiny_spec(tiny_source), image_spec], log_dir=tmp_path)
    assert [r.ok for r in results] == [False, True, True]
    error = results[0].error
    assert "selfplay-test-broken" in error and str(tmp_path) in error and "log:" in error
    log_file = next(tmp_path.glob("selfplay-test-broken-*.log"))
    assert "selfplay-no-such-package" in log_file.read_text()
    assert results[2].image == BASE_IMAGE


def test_requirement_names_reads_specifiers_not_flags():
    from sandboxes.images import requirement_names

    assert requirement_names(["pytest==9.2.0", "freezegun==1.5.5"]) == {"pytest", "freezegun"}
    # extras, compatible-release pins, markers and case all still name pytest (the hand parser missed `~=`)
    assert requirement_names(['PyTest[testing]~=8.0; python_version > "3"']) == {"pytest"}
    assert requirement_names(["pytest-cov"]) == {"pytest-cov"}
    assert requirement_names(["-e .", "./local/path"]) == set()
