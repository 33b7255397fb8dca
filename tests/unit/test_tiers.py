"""The tier rule of tests/conftest.py on a copy of it: one tier per test, from its folder only."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"
INI = """[pytest]
addopts = --strict-markers -p no:cacheprovider
markers =
    unit: u
    docker: d
    e2e: e
    adversarial: a
"""


@pytest.fixture
def layout(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=INI)
    tests = pytester.mkdir("tests")
    (tests / "conftest.py").write_text(CONFTEST.read_text())
    for folder in ("unit", "docker", "contract", "e2e", "adversarial"):
        (tests / folder).mkdir()
        (tests / folder / f"test_{folder}.py").write_text("def test_it():\n    pass\n")
    return pytester


def selected(pytester: pytest.Pytester, tier: str) -> list[str]:
    result = pytester.runpytest_inprocess("tests", "--collect-only", "-q", "-m", tier)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED), result.stdout
    return sorted(line for line in result.stdout.lines if "::" in line)


def test_each_folder_sets_exactly_one_tier(layout: pytest.Pytester) -> None:
    assert selected(layout, "unit") == ["tests/unit/test_unit.py::test_it"]
    assert selected(layout, "docker") == [
        "tests/contract/test_contract.py::test_it",
        "tests/docker/test_docker.py::test_it",
    ]
    assert selected(layout, "e2e") == ["tests/e2e/test_e2e.py::test_it"]
    assert selected(layout, "adversarial") == ["tests/adversarial/test_adversarial.py::test_it"]
    assert selected(layout, "unit and docker") == []


@pytest.mark.parametrize("marker", ["unit", "e2e"])
def test_a_tier_marker_in_a_test_file_fails_the_collection(
    layout: pytest.Pytester, marker: str
) -> None:
    (layout.path / "tests" / "unit" / "test_marked.py").write_text(
        f"import pytest\n\npytestmark = pytest.mark.{marker}\n\n\ndef test_marked():\n    pass\n"
    )
    result = layout.runpytest_inprocess("tests", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "ERROR collecting tests/unit/test_marked.py" in result.stdout.str()
    assert (
        f"tests/unit/test_marked.py::test_marked: carries tier marker(s) ['{marker}']; its tier is"
        " 'unit'" in result.stdout.str()
    )


def test_a_test_outside_the_tier_folders_fails_the_collection(layout: pytest.Pytester) -> None:
    (layout.path / "tests" / "test_loose.py").write_text("def test_loose():\n    pass\n")
    (layout.path / "tests" / "misc").mkdir()
    (layout.path / "tests" / "misc" / "test_misc.py").write_text("def test_misc():\n    pass\n")
    result = layout.runpytest_inprocess("tests", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    err = result.stdout.str()
    assert "tests/test_loose.py::test_loose: outside every tier folder" in err
    assert "tests/misc/test_misc.py::test_misc: outside every tier folder" in err


def test_a_tier_expression_does_not_import_the_other_folders(layout: pytest.Pytester) -> None:
    broken = layout.path / "tests" / "e2e" / "test_broken.py"
    broken.write_text("raise RuntimeError('imported')\n")
    assert selected(layout, "unit") == ["tests/unit/test_unit.py::test_it"]
    assert selected(layout, "unit or docker") == [
        "tests/contract/test_contract.py::test_it",
        "tests/docker/test_docker.py::test_it",
        "tests/unit/test_unit.py::test_it",
    ]
    result = layout.runpytest_inprocess("tests", "--collect-only", "-q", "-m", "not docker")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # any other expression imports every folder
    assert "RuntimeError: imported" in result.stdout.str()


def test_items_outside_tests_are_left_alone(layout: pytest.Pytester) -> None:
    """An agentbench run started from the repository root collects task items outside tests/:
    they are no tests of the harness and get neither a tier nor a collection error."""
    (layout.path / "elsewhere").mkdir()
    (layout.path / "elsewhere" / "test_x.py").write_text("def test_x():\n    pass\n")
    untiered = "not (unit or docker or e2e or adversarial)"
    result = layout.runpytest_inprocess("elsewhere", "--collect-only", "-q", "-m", untiered)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "elsewhere/test_x.py::test_x" in result.stdout.lines
