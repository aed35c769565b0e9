"""Numbers as settings and provider figures mean them: ``bool`` is never a number here.

``True`` is an ``int`` subclass in Python; read as a count it would be a one-token window.
"""

from __future__ import annotations

from typing import TypeGuard

# Exports the two number tests every validator uses.
__all__ = ["is_int", "is_number"]


def is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)
