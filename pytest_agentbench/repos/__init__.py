"""Repository manager: the bare mirror cache (mirror.py: `MirrorCache`, `Checkout`), per-commit
packs cut from it, self-contained per-attempt checkouts (workspace.py), source URLs and their
checks (sources.py), and the git CLI runner with its one-line errors (gitcmd.py: `RepoError`).

Uses the git CLI only. May import: paths, schemas. Import the module you need; this package
file imports nothing, so importing one part does not load the others.
"""
