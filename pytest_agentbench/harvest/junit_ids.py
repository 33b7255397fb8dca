"""pytest node ids from a junit XML report, for the test modules a candidate touches.

pytest names a junit test case `classname` = the module's path relative to its rootdir with
dots (`tests.test_x`, plus `.TestClass` for a method) and `name` = the function with its
parameters. The module is known (the candidate's test files), so the mapping back is exact:
`tests/test_x.py::TestClass::test_y[p]`. A case that maps to no known module (a collection
error names the module only) is reported by its module path with outcome `error`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pytest_agentbench.core.evidence import parse


def node_outcomes(junit_text: str, modules: list[str]) -> dict[str, str]:
    """{node id: passed | failed | error | skipped}; worst outcome wins for a repeated id.
    Raises core.evidence.EvidenceError for a file that is not a safe junit report."""
    parse(junit_text)  # the same checks scoring makes: size, no DTD, the right root
    dotted = sorted(((m[:-3].replace("/", "."), m) for m in modules), key=lambda x: -len(x[0]))
    outcomes: dict[str, str] = {}
    for case in ET.fromstring(junit_text).iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        node = _node_id(classname, name, dotted)
        outcome = _outcome(case)
        if outcomes.get(node) not in ("failed", "error"):
            outcomes[node] = outcome
    return outcomes


def _node_id(classname: str, name: str, dotted: list[tuple[str, str]]) -> str:
    for prefix, module in dotted:
        if classname == prefix or classname.startswith(prefix + "."):
            inner = classname[len(prefix) + 1:]
            return "::".join([module, *(inner.split(".") if inner else []), name])
        if not classname and (name == prefix or name.endswith("." + prefix)):
            return module  # a collection error: the module could not be imported
    return f"{classname}::{name}" if classname else name


def _outcome(case: ET.Element) -> str:
    tags = {child.tag for child in case}
    for tag, outcome in (("error", "error"), ("failure", "failed"), ("skipped", "skipped")):
        if tag in tags:
            return outcome
    return "passed"
