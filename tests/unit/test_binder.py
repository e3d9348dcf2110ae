"""binder/ must build the environment pyproject.toml describes.

Binder installs binder/requirements.txt and binder/apt.txt, then runs postBuild.
If a dependency is added to pyproject and not to binder/ (or the other way
round), Binder users get a broken lab while `make lab` works: these tests
catch that drift.
"""

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def _name(requirement: str) -> str:
    """Normalised distribution name of a requirement line (PEP 503)."""
    name = re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def test_binder_requirements_match_runtime_and_lab_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["labs"]
    binder = _requirement_lines(BINDER / "requirements.txt")
    assert sorted(map(_name, binder)) == sorted(map(_name, wanted))
    # Same version floors too, not just the same names.
    assert sorted(binder) == sorted(wanted)


def test_binder_runtime_is_a_python_kafkalab_supports() -> None:
    # With a binder/ folder, repo2docker ignores pyproject's requires-python and
    # builds its default Python (3.10 in repo2docker 2025) unless binder/runtime.txt
    # names one; on 3.10 postBuild's `pip install -e .` refuses kafkalab.
    runtime = _requirement_lines(BINDER / "runtime.txt")
    assert len(runtime) == 1 and re.fullmatch(r"python-3\.\d+", runtime[0]), runtime
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert Version(runtime[0].removeprefix("python-")) in SpecifierSet(requires)


def test_binder_apt_has_graphviz_and_a_java_runtime() -> None:
    packages = set(_requirement_lines(BINDER / "apt.txt"))
    assert "graphviz" in packages
    assert any(re.fullmatch(r"(openjdk-\d+|default)-jre(-headless)?", p) for p in packages)


def test_postbuild_installs_kafkalab_and_apalache() -> None:
    post_build = BINDER / "postBuild"
    text = post_build.read_text()
    assert post_build.stat().st_mode & 0o111, "postBuild must be executable"
    assert "pip install --no-deps -e ." in text
    assert "apalache-mc" in text
    # Syntax check without running it (it downloads Apalache).
    subprocess.run(["bash", "-n", str(post_build)], check=True)
