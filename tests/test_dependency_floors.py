"""The lowest versions pyproject.toml allows are versions Signal works with.

pip keeps an installed version that meets the bound, so a floor that is too low reaches
users who already have that version (from another tool in the same environment), not
CI, which installs the newest. Each entry below names what Signal relies on that the
version brought; the floors were found by running the tests on the lowest versions.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"

#: (where, distribution) -> (lowest version that works, what it brought).
NEEDED = {
    ("dependencies", "click"): (
        "8.1.4", "echo with no stream to write to (`signal fetch 2>&-` from a daemon) "
                 "is a no-op; 8.1.0 to 8.1.3 raised AttributeError and the run exited 1"),
    ("dependencies", "nh3"): (
        "0.3.7", "'<' and '>' inside attribute values are stored escaped; 0.3.6 stored "
                 "title=\"<img src=x onerror=...>\" as it came"),
    ("test", "click"): (
        "8.2", "CliRunner keeps stderr apart (result.stderr) and result.output holds "
               "both streams, as the CLI tests read them"),
    ("test", "pytest-httpserver"): (
        "1.0.7", "imports with Werkzeug 3; 1.0.0 to 1.0.6 asked werkzeug.http for "
                 "parse_authorization_header and every test module using it failed"),
    ("test", "mypy"): (
        "1.19", "typeshed with sys.__excepthook__ and xml.sax.expatreader: older mypy "
                "reports errors in the package as it is"),
    ("test", "ruff"): (
        "0.8", "UP027 gone: older ruff asks for generator unpacking in two tests"),
}


def _requirements(where: str) -> dict[str, Requirement]:
    project = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]
    listed = (project["dependencies"] if where == "dependencies"
              else project["optional-dependencies"][where])
    found = (Requirement(line) for line in listed)
    return {req.name.lower(): req for req in found}


@pytest.mark.parametrize(("where", "name"), sorted(NEEDED))
def test_the_lowest_allowed_version_has_what_signal_relies_on(where: str, name: str) -> None:
    needed, why = NEEDED[(where, name)]
    requirement = _requirements(where).get(name)
    assert requirement is not None, f"{name} is not a requirement in {where}: {why}"
    floors = [Version(spec.version) for spec in requirement.specifier
              if spec.operator in (">=", "==", "~=")]
    assert floors and max(floors) >= Version(needed), (
        f"{where}: {requirement} allows versions below {needed}, which lack: {why}")
