"""The public-history rule: what of a message's metadata is executed (``execution_form``)."""

from __future__ import annotations

from amplifier_module_context_simple.vocabulary._public import REFERENCE_ONLY_KEY, execution_form


def test_the_sequence_number_stays_unless_asked_to_go() -> None:
    message = {"role": "user", "content": "hi", "metadata": {"_seq": 3, REFERENCE_ONLY_KEY: False}}
    assert execution_form(message)["metadata"] == {"_seq": 3}
    assert execution_form(message, strip_sequence=True)["metadata"] == {}
    assert message["metadata"] == {"_seq": 3, REFERENCE_ONLY_KEY: False}, "the stored row keeps it"
