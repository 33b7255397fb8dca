"""LLM access: the `ModelClient` port, an OpenAI-compatible httpx client (OpenRouter, OpenAI,
vLLM, Ollama presets), config resolution and tool-call fallback parsing.

Imports neither pytest nor docker; importing it has no side effects.
"""

from pytest_agentbench.llm.base import (
    AssistantMessage,
    ChatParams,
    ChatResult,
    ModelClient,
    TokenUsage,
    ToolCall,
    ToolCallsSource,
)
from pytest_agentbench.llm.client import OpenAICompatClient
from pytest_agentbench.llm.errors import (
    LLMAuthError,
    LLMBadResponse,
    LLMError,
    LLMRequestError,
    LLMRetryExhausted,
)
from pytest_agentbench.llm.presets import (
    CODE_DEFAULTS,
    PRESET_REGISTRY_VERSION,
    PRESETS,
    ModelConfigError,
    Preset,
    ResolvedModelConfig,
    resolve_model_config,
)
from pytest_agentbench.llm.toolcall_fallback import (
    parse_fallback_tool_calls,
    parse_native_tool_calls,
)
from pytest_agentbench.llm.wire import is_retryable_status

__all__ = [
    "CODE_DEFAULTS", "PRESETS", "PRESET_REGISTRY_VERSION",
    "AssistantMessage", "ChatParams", "ChatResult", "LLMAuthError", "LLMBadResponse",
    "LLMError", "LLMRequestError", "LLMRetryExhausted", "ModelClient", "ModelConfigError",
    "OpenAICompatClient", "Preset", "ResolvedModelConfig", "ToolCall",
    "TokenUsage", "ToolCallsSource", "is_retryable_status", "parse_fallback_tool_calls",
    "parse_native_tool_calls", "resolve_model_config",
]
