"""infra.dockerfile: the COPY sources of a Dockerfile, and the asset allowlist built from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.dockerfile import DockerfileError, context_excludes, copy_sources, missing_sources

MULTI = """\
# syntax=docker/dockerfile:1
FROM python:3.12-slim AS build
COPY --chown=10001:10001 --link requirements.txt lib/ /app/
COPY --from=build /app /srv/app
COPY ["data dir/", "conf.json", "/etc/app/"]
COPY --chmod=644 ["extra.txt", "/etc/extra.txt"]
ADD https://example.com/archive.tar.gz /tmp/
ADD vendor/*.whl \\
    # the wheels, one line on
    /wheels/
COPY <<EOF /etc/motd
hello
EOF
copy lib/ /again/
"""


def test_copy_sources_reads_every_form_and_skips_what_is_not_from_the_context() -> None:
    # GIVEN a Dockerfile with flags, several sources per COPY, the JSON form, a continued line, --from, a URL ADD,
    # a here-document and a repeated source
    # WHEN its COPY/ADD sources are read
    sources = copy_sources(MULTI)
    # THEN every context path is there once, in order; --from, the URL and the here-document are not
    assert sources == ("requirements.txt", "lib/", "data dir/", "conf.json", "extra.txt", "vendor/*.whl")


def test_the_worker_dockerfile_copies_the_kernel_geo_service_and_transforms() -> None:
    # GIVEN the worker image's Dockerfile WHEN read THEN its sources include transforms/ (docs/TRANSFORM.md) and the
    # kernel, and not the partitioner library (the worker imports only the kernel: scripts/check_structure.py)
    text = (Path(__file__).resolve().parents[2] / "geo_service" / "Dockerfile").read_text()
    assert set(copy_sources(text)) >= {"geokernel/", "geo_service/", "transforms/"}
    assert "partitioner/" not in copy_sources(text)


def test_context_excludes_keep_exactly_the_copied_paths_and_the_dockerfile(tmp_path: Path) -> None:
    # GIVEN a context with a copied directory, a copied file and a Dockerfile in a subfolder
    (tmp_path / "lib").mkdir()
    (tmp_path / "requirements.txt").write_text("x\n")
    (tmp_path / "img").mkdir()
    dockerfile = tmp_path / "img" / "Dockerfile"
    dockerfile.write_text("FROM scratch\nCOPY --chown=1:1 requirements.txt lib/ /app/\n")
    # WHEN the allowlist is built
    excludes = context_excludes(dockerfile, tmp_path)
    # THEN everything is excluded but those paths (directories with their contents), the Dockerfile and its ignore file
    assert excludes == ["**", "!requirements.txt", "!lib/", "!lib/**", "!img/Dockerfile", "!img/Dockerfile.dockerignore",
                        "**/__pycache__", "**/*.pyc"]


@pytest.mark.parametrize(("copy", "message"), [
    ("COPY missing/ /app/", r"copies 'missing/', which is not in its build context"),
    ("COPY ../outside /app/", r"copies '../outside', outside its build context"),
    ("COPY *.nothing /app/", r"copies '\*\.nothing', which matches nothing"),
    ("COPY onlyone", r"COPY needs at least one source and a destination, got 'COPY onlyone'"),
    ('COPY ["a", 1]', r"the JSON form must be a list of strings"),
])  # fmt: skip
def test_a_source_the_context_lacks_fails_naming_it(tmp_path: Path, copy: str, message: str) -> None:
    # GIVEN a Dockerfile whose COPY cannot be satisfied from the context WHEN the allowlist is built
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM scratch\n{copy}\n")
    # THEN synth stops with the instruction or source named
    with pytest.raises(DockerfileError, match=message):
        context_excludes(dockerfile, tmp_path)


def test_missing_sources_names_what_a_staged_context_lacks(tmp_path: Path) -> None:
    # GIVEN a staged context holding lib/ and a.txt but not data/ nor the wheels
    (tmp_path / "lib").mkdir()
    (tmp_path / "a.txt").write_text("x")
    text = "FROM scratch\nCOPY a.txt lib/ data/ /app/\nCOPY wheels/*.whl /w/\n"
    # WHEN checked THEN the absent sources are listed, as written
    assert missing_sources(text, tmp_path) == ["data/", "wheels/*.whl"]
