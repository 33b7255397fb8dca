.PHONY: bootstrap run test lint type
bootstrap: ; bash scripts/bootstrap
run: ; bash scripts/run-suite
test: ; bash scripts/test
lint: ; uv run ruff check pytest_agentbench tests scripts
type: ; uv run mypy pytest_agentbench
