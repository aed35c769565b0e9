"""The host's own contract tests for context modules, run against this package."""

from __future__ import annotations

from amplifier_core.validation.behavioral import ContextBehaviorTests
from amplifier_core.validation.structural import ContextStructuralTests


class TestContextBehavior(ContextBehaviorTests):
    pass


class TestContextStructural(ContextStructuralTests):
    pass
