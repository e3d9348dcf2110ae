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


def _pins(path: Path) -> dict[str, Version]:
    pins = {}
    for line in _requirement_lines(path):
        name, sep, version = line.partition("==")
        assert sep and version, f"binder/requirements.txt pins every package exactly: {line!r}"
        pins[_name(name)] = Version(version)
    return pins


def test_binder_pins_every_runtime_and_lab_dependency_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["labs"]
    pins = _pins(BINDER / "requirements.txt")
    for requirement in wanted:
        name = _name(requirement)
        assert name in pins, f"{name} is a lab dependency but Binder does not install it"
        specifier = SpecifierSet(re.sub(r"^[A-Za-z0-9_.\-\[\]]+", "", requirement).strip())
        assert pins[name] in specifier, (
            f"Binder pins {name}=={pins[name]}, pyproject wants {specifier}"
        )
    assert "kafkalab" not in pins, "postBuild installs kafkalab itself, from the checkout"


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


def _stub(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n" + script + "\n")
    path.chmod(0o755)


def test_postbuild_goes_on_without_apalache_when_its_download_fails(tmp_path: Path) -> None:
    # Stand-ins on PATH: pip (through `python -m pip`) succeeds, the download fails.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stub(bin_dir, "python", 'echo "python $*" >> "$HOME/calls"')
    _stub(bin_dir, "curl", "echo 'curl: (6) Could not resolve host' >&2; exit 6")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
    done = subprocess.run(
        [str(BINDER / "postBuild")], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "built-in checker" in done.stderr
    assert (home / "calls").read_text() == "python -m pip install --no-deps -e .\n"
    assert not (home / ".local" / "bin" / "apalache-mc").exists()


def test_binder_start_sets_the_binder_scale_and_hands_over() -> None:
    start = BINDER / "start"
    assert start.stat().st_mode & 0o111, "repo2docker runs binder/start: it must be executable"
    env = {"PATH": "/usr/bin:/bin"}
    shown = subprocess.run(
        [str(start), "env"], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert "KAFKALAB_SCALE=ci" in shown
    assert "KAFKALAB_SPARK_DRIVER_MEMORY=1g" in shown
    assert "KAFKALAB_MIN_SESSION_TIMEOUT_MS=3000" in shown
    # What a user sets wins; and start runs the command it is given (exec "$@").
    mine = subprocess.run(
        [str(start), "sh", "-c", "echo $KAFKALAB_SCALE; exit 3"],
        env={**env, "KAFKALAB_SCALE": "full"},
        capture_output=True,
        text=True,
    )
    assert mine.returncode == 3 and mine.stdout == "full\n"
