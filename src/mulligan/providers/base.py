"""The provider boundary's types, re-exported from the core (`mulligan.wire`), which owns them.

Providers convert to their wire format at this boundary and nowhere else; see `mulligan.wire`
for the contract every model keeps.
"""

from __future__ import annotations

from mulligan.wire import (
    Done,
    Model,
    RetryDelta,
    StreamDelta,
    StreamingModel,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolSpec,
)

__all__ = ["Done", "Model", "RetryDelta", "StreamDelta", "StreamingModel", "TextDelta",
           "ThinkingDelta", "ToolCallDelta", "ToolSpec"]
