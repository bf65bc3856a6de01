"""`toolz_box`: a fresh Docker sandbox of toolz for a fixture's body (the session's shared one, or a module's own)."""

from __future__ import annotations


def toolz_box():
    """Yields a fresh Docker sandbox of toolz and closes it when the generator is closed."""
    from repos.listfile import get_repo
    from sandboxes.docker import DockerSandbox
    from sandboxes.images import repo_image

    box = DockerSandbox.create(repo_image(get_repo("toolz")), workdir="/testbed")
    yield box
    box.close()
