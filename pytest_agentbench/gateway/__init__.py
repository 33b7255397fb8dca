"""The model gateway: a host-side, per-attempt model endpoint for agents that are
programs. It holds the key, speaks OpenAI Chat Completions, OpenAI Responses and Anthropic
Messages, checks the attempt's budgets before forwarding through the model client, and records
every call as llm_v0 does. Imports neither pytest nor docker; importing it has no side effects."""

from pytest_agentbench.gateway.cassette import CASSETTE_NAME, CassetteError
from pytest_agentbench.gateway.meter import GatewayStop
from pytest_agentbench.gateway.server import ModelGateway
from pytest_agentbench.llm.spend import Budgets

__all__ = ["CASSETTE_NAME", "CassetteError", "Budgets", "GatewayStop", "ModelGateway"]
