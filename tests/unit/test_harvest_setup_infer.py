"""Setup inference for harvested tasks (issue 21 item 3): table tests over small synthetic file
sets, one rule each, then the real toolz and tomli histories (../shared/repos)."""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_agentbench.harvest.setup_infer import SetupPlan, infer_setup
from pytest_agentbench.harvest.setup_requirements import poetry_spec, spec_allows

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT.parent / "shared" / "repos"
PIP = "pip install --no-warn-script-location"


def plan_for(files: dict[str, str], given: tuple[str, ...] = ()) -> SetupPlan:
    """The plan for a commit holding exactly `files`; reading a path not listed fails the test."""

    def read(path: str) -> bytes | None:
        assert path in files, f"read {path}, which is not at the commit"
        return files[path].encode()

    return infer_setup(read, sorted(files), given)


PKG = {"pkg/__init__.py": "", "pkg/tests/test_pkg.py": "def test(): pass\n"}
SRC_PKG = {"src/pkg/__init__.py": "", "tests/test_pkg.py": "def test(): pass\n"}
FLIT = '[build-system]\nrequires = ["flit_core>=3.2"]\nbuild-backend = "flit_core.buildapi"\n'

CASES = {
    # name: (files, commands, test_env)
    "bare setup.py, tox deps only pytest": (
        {**PKG, "setup.py": "from setuptools import setup\nsetup(name='pkg', packages=['pkg'])\n",
         "tox.ini": "[tox]\nenvlist = py311\n[testenv]\ndeps = pytest\ncommands = py.test\n"},
        (), (),
    ),
    "src layout, flit, no dependencies": (
        {**SRC_PKG, "pyproject.toml": FLIT + '[project]\nname = "pkg"\nversion = "1"\n'},
        (), (("PYTHONPATH", "src"),),
    ),
    "setuptools package-dir maps the root package to lib/": (
        {"lib/pkg/__init__.py": "", "setup.cfg": "[options]\npackage_dir =\n    =lib\n"},
        (), (("PYTHONPATH", "lib"),),
    ),
    "test extra: pytest and coverage dropped, hypothesis installed": (
        {**PKG, "pyproject.toml": FLIT + '[project]\nname = "pkg"\nversion = "1"\n'
         'dependencies = ["attrs", "click>=8"]\n'
         '[project.optional-dependencies]\ntest = ["pytest>=6", "pytest-cov", "hypothesis"]\n'
         'docs = ["sphinx"]\n'},
        (f"{PIP} 'click>=8' hypothesis",), (),
    ),
    "PEP 735 dependency group with an include-group": (
        {**PKG, "pyproject.toml": FLIT + '[project]\nname = "pkg"\nversion = "1"\n'
         '[dependency-groups]\ntest = ["pytest", {include-group = "extra"}, "freezegun"]\n'
         'extra = ["responses==0.25"]\ndev = ["ruff", {include-group = "test"}]\n'},
        (f"{PIP} responses==0.25 freezegun",), (),
    ),
    "test requirements file including the runtime one": (
        {**PKG, "test-requirements.txt": "-r requirements.txt\npytest  # runner\nmock\n",
         "requirements.txt": "# runtime\nrequests>=2\n"},
        (f"{PIP} 'requests>=2' mock",), (),
    ),
    "requirements file with pip options goes to pip as is": (
        {**PKG, "setup.py": "from setuptools import setup\nsetup(name='pkg')\n",
         "requirements-dev.txt": "-e .\npytest\n"},
        (f"{PIP} -r requirements-dev.txt",), (),
    ),
    "setup.py literals through a module-level name": (
        {**PKG, "setup.py": "from setuptools import setup\nDEPS = ['six']\n"
         "setup(name='pkg', install_requires=DEPS,\n"
         "      extras_require={'test': ['pytest', 'nose'], 'all': ['numpy']})\n"},
        (f"{PIP} six nose",), (),
    ),
    "setup.cfg install_requires and tests_require": (
        {**PKG, "setup.cfg": "[metadata]\nname = pkg\n[options]\ninstall_requires =\n    toolz\n"
         "    importlib-metadata; python_version < '3.8'\ntests_require = pytest; mock\n"},
        (f"{PIP} toolz mock",), (),
    ),
    "tox deps: -r file, conditional and substituted lines skipped": (
        {**PKG, "tox.ini": "[testenv]\ndeps =\n    -r reqs/test.txt\n    py27: mock\n"
         "    {[base]deps}\n    flaky\n", "reqs/test.txt": "pytest\nsortedcontainers\n"},
        (f"{PIP} sortedcontainers flaky",), (),
    ),
    "poetry: python skipped, caret spelled as PEP 440, git tooling dropped": (
        {**PKG, "pyproject.toml": '[tool.poetry]\nname = "pkg"\n[tool.poetry.dependencies]\n'
         'python = "^3.8"\nrich = "^12.1"\n[tool.poetry.dev-dependencies]\npytest = "*"\n'
         'pytest-randomly = "*"\nmypy = { git = "https://github.com/python/mypy.git" }\n'
         'python-dateutil = "*"\ntypes-python-dateutil = "*"\n'},
        (f"{PIP} 'rich>=12.1,<13' python-dateutil",), (),
    ),
    "compiled extension: the project is built, editable, with its test extra": (
        {**PKG, "pkg/_speed.pyx": "", "pyproject.toml": '[build-system]\n'
         'requires = ["setuptools", "Cython>=3"]\n[project]\nname = "pkg"\nversion = "1"\n'
         '[project.optional-dependencies]\ntest = ["pytest", "hypothesis"]\n'},
        (f"{PIP} -e '.[test]'",), (),
    ),
    "install_requires computed in setup.py: pip installs the project": (
        {**PKG, "setup.py": "from setuptools import setup\n"
         "setup(name='pkg', install_requires=open('deps.txt').read().split())\n"},
        (f"{PIP} -e .",), (),
    ),
    "setuptools_scm writes a version file the tree lacks": (
        {**SRC_PKG, "pyproject.toml": '[build-system]\nrequires = ["setuptools_scm"]\n'
         '[project]\nname = "pkg"\ndynamic = ["version"]\n'
         '[tool.setuptools_scm]\nwrite_to = "src/pkg/_version.py"\n'},
        (f"{PIP} -e .",), (("PYTHONPATH", "src"),),
    ),
    "a plugin the pytest addopts use is kept": (
        {**PKG, "pytest.ini": "[pytest]\naddopts = --cov=pkg -p randomly\n",
         "requirements-test.txt": "pytest-cov\npytest-randomly\npytest-xdist\n"},
        (f"{PIP} pytest-cov pytest-randomly",), (),
    ),
    "pytest pinned beyond the image's is kept, one it satisfies is not": (
        {**PKG, "requirements-test.txt": "pytest>=8.0\npluggy>=0.13\n"},
        (f"{PIP} 'pytest>=8.0'",), (),
    ),
    "markers the runner's Python 3.11 fails are dropped": (
        {**PKG, "requirements-test.txt": 'tomli; python_version < "3.11"\n'
         "exceptiongroup; python_version<'3.11'\nbackports.zoneinfo; platform_system == 'X'\n"},
        (f"{PIP} " + shlex.quote("backports.zoneinfo; platform_system == 'X'"),), (),
    ),
    "a Makefile or noxfile alone is not executed": (
        {**PKG, "Makefile": "test:\n\tpip install requests && pytest\n",
         "noxfile.py": "import nox\n@nox.session\ndef tests(s):\n    s.install('requests')\n"},
        (), (),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_rule(name: str) -> None:
    files, commands, test_env = CASES[name]
    plan = plan_for(files)
    assert (plan.commands, plan.test_env) == (commands, test_env), plan.source
    assert plan.network_policy == ("setup_only" if commands else "none")
    assert "\n" not in plan.source


def test_manifests_are_the_files_read_with_their_hashes() -> None:
    files = {**PKG, "setup.py": "from setuptools import setup\nsetup(install_requires=['six'])\n",
             "tox.ini": "[testenv]\ndeps = pytest\n", "README.md": "x"}
    plan = plan_for(files)
    expected = tuple(
        (path, hashlib.sha256(files[path].encode()).hexdigest()) for path in ("setup.py", "tox.ini")
    )
    assert plan.manifests == expected
    assert "setup.py install_requires" in plan.source and "six" in plan.source


def test_given_commands_are_used_as_they_are() -> None:
    files = {**SRC_PKG, "pyproject.toml": FLIT + '[project]\nname = "pkg"\nversion = "1"\n',
             "requirements/ci.txt": "numpy\n", "noxfile.py": ""}
    plan = plan_for(files, given=("make deps", "pip install -e ."))
    assert plan.commands == ("make deps", "pip install -e .")
    assert plan.test_env == (("PYTHONPATH", "src"),)
    assert plan.network_policy == "setup_only"
    assert [path for path, _ in plan.manifests] == ["pyproject.toml", "requirements/ci.txt"]
    assert plan.source.startswith("given --setup commands (2)")


def test_broken_manifests_are_noted_not_raised() -> None:
    plan = plan_for({**PKG, "pyproject.toml": "[project\nname=", "setup.py": "print 'py2'\n"})
    assert plan.commands == ()
    assert "pyproject.toml ignored (invalid TOML" in plan.source
    assert "setup.py ignored (not Python 3 syntax)" in plan.source


def pyproject_with(version: str, deps: str) -> dict[str, str]:
    return {**PKG, "pyproject.toml": FLIT + f'[project]\nname = "pkg"\nversion = "{version}"\n'
            f'[project.optional-dependencies]\ntest = [{deps}]\n'}


def test_key_is_shared_across_version_bumps_and_split_by_what_setup_installs() -> None:
    base = plan_for(pyproject_with("1.0", '"hypothesis"'))
    bumped = plan_for(pyproject_with("1.1", '"hypothesis"'))
    other = plan_for(pyproject_with("1.1", '"hypothesis", "mock"'))
    assert base.manifests != bumped.manifests
    assert base.key() == bumped.key() != other.key()
    as_is = {**PKG, "requirements-dev.txt": "-e .\nmock\n"}
    changed = {**PKG, "requirements-dev.txt": "-e .\nmock>=5\n"}
    assert plan_for(as_is).key() != plan_for(changed).key()  # pip reads that file itself
    src = plan_for({"src/pkg/__init__.py": ""})
    root = plan_for({"pkg/__init__.py": ""})
    assert src.commands == root.commands and src.key() != root.key()


def test_given_commands_key_covers_every_manifest() -> None:
    given = ("pip install -e .",)
    one = plan_for(pyproject_with("1.0", '"hypothesis"'), given)
    two = plan_for(pyproject_with("1.1", '"hypothesis"'), given)
    assert one.key() != two.key()


@pytest.mark.parametrize(
    ("constraint", "spec"),
    [("*", ""), ("^1.2.3", ">=1.2.3,<2"), ("^0.2.3", ">=0.2.3,<0.3"), ("~1.2", ">=1.2,<1.3"),
     ("~1", ">=1,<2"), ("1.0", "==1.0"), (">=1,<2", ">=1,<2")],
)
def test_poetry_constraints_as_pep_440(constraint: str, spec: str) -> None:
    assert poetry_spec(constraint) == spec


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [("", True), (">=7", True), (">=7.2.1", True), (">7.2.1", False), (">=8.0", False),
     (">=6,<8", True), ("==7.*", False), ("~=7.0", False), ("!=7.2.1", False)],
)
def test_spec_allows_the_image_version_only_when_sure(spec: str, allowed: bool) -> None:
    assert spec_allows(spec, "7.2.1") is allowed


# The real histories: every first-parent commit of toolz and tomli.


class Checkout:
    """A clone of one bundle, its files read through one `git cat-file --batch` process."""

    def __init__(self, bundle: Path, dest: Path) -> None:
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(bundle), str(dest)], check=True)
        self.dest = dest
        self.batch = subprocess.Popen(
            ["git", "-C", str(dest), "cat-file", "--batch"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.dest), *args], check=True,
                              capture_output=True, text=True).stdout

    def read(self, commit: str, path: str) -> bytes | None:
        assert self.batch.stdin and self.batch.stdout
        self.batch.stdin.write(f"{commit}:{path}\n".encode())
        self.batch.stdin.flush()
        header = self.batch.stdout.readline().split()
        if header[-1] == b"missing":
            return None
        content = self.batch.stdout.read(int(header[2]) + 1)
        return content[:-1]

    def plan(self, commit: str) -> SetupPlan:
        paths = self.git("ls-tree", "-r", "--name-only", commit).splitlines()
        return infer_setup(lambda path: self.read(commit, path), paths)

    def first_parents(self) -> list[str]:
        return self.git("log", "--first-parent", "--format=%H", "HEAD").split()


@pytest.fixture(scope="session")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Checkout]]:
    root = tmp_path_factory.mktemp("setup-infer-bundles")
    names = ("toolz", "tomli")
    checkouts = {name: Checkout(BUNDLES / f"{name}.bundle", root / name) for name in names}
    yield checkouts
    for checkout in checkouts.values():
        checkout.batch.kill()
        checkout.batch.wait()


def test_toolz_needs_no_install_after_its_first_weeks(histories: dict[str, Checkout]) -> None:
    toolz = histories["toolz"]
    plans = [toolz.plan(commit) for commit in toolz.first_parents()]
    empty = [plan for plan in plans if not plan.commands]
    assert len(plans) == 377 and len(empty) >= 360  # 13 early commits declare itertoolz, functoolz
    assert all(plan.test_env == () and plan.network_policy == "none" for plan in empty)
    assert len({plan.key() for plan in plans}) == 2
    tip = toolz.plan("568c2b8")
    assert [path for path, _ in tip.manifests] == ["pyproject.toml", "tox.ini"]
    assert "tox.ini [testenv]: 1" in tip.source  # deps = pytest, which the image has


def test_tomli_installs_only_dateutil_in_one_environment(histories: dict[str, Checkout]) -> None:
    tomli = histories["tomli"]
    plans = [tomli.plan(commit) for commit in tomli.first_parents()]
    outcomes = Counter((plan.commands, plan.test_env) for plan in plans)
    assert set(outcomes) == {
        ((), ()),  # the first weeks, before python-dateutil joined the tests
        ((f"{PIP} python-dateutil",), ()),  # poetry, the test extra, tests/requirements.txt
        ((), (("PYTHONPATH", "src"),)),  # since "Remove pytest, move to src layout (#163)"
    }
    assert len(plans) == 293 and len({plan.key() for plan in plans}) == 3
    tip, dateutil_gone = tomli.plan("920e20b"), tomli.plan("f0d053f")
    assert tip.commands == dateutil_gone.commands == ()
    assert tip.test_env == (("PYTHONPATH", "src"),)
    poetry, requirements = tomli.plan("ba39927"), tomli.plan("a54d95e^")
    assert "tool.poetry.dev-dependencies" in poetry.source
    assert "tests/requirements.txt" in requirements.source
    assert poetry.manifests != requirements.manifests and poetry.key() == requirements.key()
