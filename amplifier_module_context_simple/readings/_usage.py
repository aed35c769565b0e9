"""Reading the provider's usage: the context occupancy one ``llm:response`` reports.

What counts as a reading
------------------------
Context-window occupancy of one request is ``input_tokens + cache_write_tokens``.
Under the host's usage contract ``input_tokens`` is already the gross input (fresh
tokens plus tokens served from the prompt cache), so ``cache_read_tokens`` is never
added on top. Cache writes are billed apart from the gross input (a first request with
a large system prompt can report almost everything as cache writes), so they must be
added or occupancy would be badly undercounted.

The number is retrospective: it describes the request that was just answered, not the
one being assembled now (the "one-call lag"). Two forward-looking uses close that lag:

* Each view handed out is answered by at most one reading (the first one after it); the
  trigger figure for the next request is that reading plus the modelled size of what the
  view has gained since (``TokenMeter.figure``).
* The pairs (our estimate of a view, the reading that answered it) fit a ``SizeModel``,
  ``real = overhead + k * estimate``: ``overhead`` is what every request carries that the
  context does not hold (tool definitions, system overlays) and does not shrink when
  messages leave; ``k`` is the estimator's bias. The ladder sizes reductions in estimate
  units, so the manager converts its real-unit targets with ``SizeModel.to_estimate``.

Where the numbers come from
---------------------------
Host facts (amplifier-core 2.0.2, checked against the real hook registry):

* Handlers are called as ``handler(event, data)``; both plain and ``async`` functions
  are accepted. ``register`` returns a callable that unregisters the handler (it returns
  ``None`` and may be called more than once).
* Payloads are JSON-round-tripped by the host before handlers see them. A value that is
  not JSON (for example a pydantic ``Usage`` object) arrives as its ``str()``, which for
  ``Usage`` is ``"input_tokens=10 output_tokens=2 ... cache_write_tokens=None ..."``.
  Integers too large for the host's JSON layer arrive as floats. ``data`` itself is
  passed through unchanged when it is not a dict.
* Key names: ``amplifier_core.message_models.Usage`` has ``input_tokens``,
  ``cache_read_tokens`` and ``cache_write_tokens`` (the cache fields may be ``None``); the
  gRPC wire ``Usage`` uses ``prompt_tokens`` and ``cache_creation_tokens``; the ``Usage``
  docstring names Anthropic's ``cache_creation_input_tokens`` as an allowed extra.

So ``usage`` is accepted as a mapping, as an object with those attributes, or as text:
a JSON object; a Python dict literal (parsed with ``ast.literal_eval``, which evaluates
literals only and never runs code, and only when the text is shaped like a dict); or
the ``name=value`` rendering of a pydantic model (or a dict rendering that holds
non-literal values such as ``Decimal``), from which only the known integer keys are
picked. Text with unbalanced brackets looks cut off and is refused, as is text naming a
known key twice. Anything that does not yield a clean reading is ignored and the
previous reading stays.

Key precedence: the canonical names win (``input_tokens``, then ``prompt_tokens``;
``cache_write_tokens``, then ``cache_creation_tokens``, then
``cache_creation_input_tokens``). One raw-provider shape gets special treatment: when the
usage carries Anthropic's own ``cache_read_input_tokens`` and none of the normalised
cache keys (``cache_read_tokens`` / ``cache_write_tokens``), it is the provider's raw
usage, whose ``input_tokens`` *excludes* cache reads; the cache reads are then added to
rebuild the gross input. Undercounting is the dangerous direction for a trigger, and a
normalised payload always carries the normalised keys.
"""

from __future__ import annotations

__all__ = ["parse_usage_reading", "reading_tokens"]

import ast
import json
import re
from collections.abc import Mapping
from typing import Any

from ._size_model import as_count

#: Largest token count accepted in one *reading* field: a sanity bound against corrupt
#: usage, not a limit on budgets or estimates (those may be any non-negative int). 2**53
#: is the largest integer a JSON double carries exactly.
_MAX_READING = 2**53
#: Longest usage text we are willing to parse. A real usage rendering is a few hundred
#: characters; this bounds the work done on garbage.
_MAX_USAGE_TEXT = 16_384

_INPUT_KEYS = ("input_tokens", "prompt_tokens")
_WRITE_KEYS = ("cache_write_tokens", "cache_creation_tokens", "cache_creation_input_tokens")
_RAW_READ_KEY = "cache_read_input_tokens"
_NORMALISED_CACHE_KEYS = ("cache_read_tokens", "cache_write_tokens")
_KNOWN_KEYS = (*_INPUT_KEYS, *_WRITE_KEYS, _RAW_READ_KEY, "cache_read_tokens")

# ``name=123`` / ``name=None`` (pydantic str/repr) or ``'name': 123`` (dict rendering),
# for known names only. Floats and other values do not match, so such a key stays absent
# (and an absent input count rejects the reading).
_PAIR_RE = re.compile(
    r"(?<![\w.])['\"]?(" + "|".join(_KNOWN_KEYS) + r")['\"]?\s*[:=]\s*(-?\d+|None)(?![\w.])"
)

_BRACKETS = (("{", "}"), ("(", ")"), ("[", "]"))

_UNSET: Any = object()


def reading_tokens(value: object) -> int | None:
    """``value`` as a plausible token count of one usage field, or None."""
    count = as_count(value)
    return None if count is None or count > _MAX_READING else count


def _fields_from_text(text: str) -> Mapping[str, object] | None:
    """Recover usage fields from a string rendering of them (see module docstring)."""
    stripped = text.strip()
    if not stripped or len(stripped) > _MAX_USAGE_TEXT:
        return None
    if any(stripped.count(o) != stripped.count(c) for o, c in _BRACKETS):
        return None  # looks cut off: the last number we would read may be truncated
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            decoded = json.loads(stripped)
        except ValueError:
            decoded = None
        if decoded is None:
            try:
                decoded = ast.literal_eval(stripped)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                decoded = None
        if isinstance(decoded, dict):
            return decoded
    pairs: dict[str, object] = {}
    for name, raw in _PAIR_RE.findall(stripped):
        if name in pairs:
            return None  # the same key twice (e.g. nested): ambiguous, refuse to guess
        pairs[name] = None if raw == "None" else int(raw)
    return pairs or None


def _fields_from_object(obj: object) -> Mapping[str, object] | None:
    """Read the known usage attributes off an arbitrary object (e.g. a ``Usage`` model)."""
    fields: dict[str, object] = {}
    for name in _KNOWN_KEYS:
        value = getattr(obj, name, _UNSET)
        if value is not _UNSET:
            fields[name] = value
    return fields or None


def _usage_fields(usage: object) -> Mapping[str, object] | None:
    if isinstance(usage, Mapping):
        return usage  # pyright: ignore[reportUnknownVariableType]
    if isinstance(usage, str):
        return _fields_from_text(usage)
    if usage is None or isinstance(usage, int | float | bytes | list | tuple):
        return None
    return _fields_from_object(usage)


def _pick(fields: Mapping[str, object], keys: tuple[str, ...]) -> object:
    """The first of ``keys`` whose value is not None, or None when all are missing."""
    for key in keys:
        value = fields.get(key)
        if value is not None:
            return value
    return None


def parse_usage_reading(usage: object) -> int | None:
    """The context occupancy a usage value reports, or None when it gives no clean reading.

    Pure and total: any input, however malformed, yields an int or None without raising.
    """
    try:
        fields = _usage_fields(usage)
        if fields is None:
            return None
        gross = reading_tokens(_pick(fields, _INPUT_KEYS))
        if gross is None:
            return None
        raw_write = _pick(fields, _WRITE_KEYS)
        write = 0 if raw_write is None else reading_tokens(raw_write)
        if write is None:
            return None
        raw_read = fields.get(_RAW_READ_KEY)
        if raw_read is not None and all(fields.get(k) is None for k in _NORMALISED_CACHE_KEYS):
            read = reading_tokens(raw_read)
            if read is None:
                return None
            gross += read
        total = gross + write
        return total if total > 0 else None
    except Exception:
        return None
