"""Repository manager: bare mirror cache and self-contained per-attempt checkouts.

Uses the git CLI only; imports neither pytest nor docker.
"""

from pytest_agentbench.repos.gitcmd import RepoError
from pytest_agentbench.repos.mirror import Checkout, MirrorCache
from pytest_agentbench.repos.sources import resolve_source

__all__ = ["Checkout", "MirrorCache", "RepoError", "resolve_source"]
