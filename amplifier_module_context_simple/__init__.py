"""amplifier-module-context-simple: the default in-memory context manager for Amplifier.

It keeps a session's messages and, before every LLM request, hands the orchestrator a view
that fits the model's window. Compaction only ever shapes the view; the history itself stays
complete. See the README for configuration and behaviour.
"""

from __future__ import annotations

from ._manager import SimpleContextManager
from ._mount import mount
from .checks._invariants import check_view
from .history._project import REPAIR_KINDS
from .planning._config import ContextConfig
from .sizing._estimate import estimate_message_tokens

__amplifier_module_type__ = "context"

__all__ = [
    "REPAIR_KINDS",
    "ContextConfig",
    "SimpleContextManager",
    "check_view",
    "estimate_message_tokens",
    "mount",
]
