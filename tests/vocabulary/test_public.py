"""The public-history rule: what of a message's metadata is executed (``execution_form``)."""

from __future__ import annotations

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.vocabulary._public import (
    REFERENCE_ONLY_KEY,
    execution_form,
    sent_metadata,
)


def test_the_sequence_number_stays_unless_asked_to_go() -> None:
    message = {"role": "user", "content": "hi", "metadata": {"_seq": 3, REFERENCE_ONLY_KEY: False}}
    assert execution_form(message)["metadata"] == {"_seq": 3}
    assert execution_form(message, strip_sequence=True)["metadata"] == {}
    assert message["metadata"] == {"_seq": 3, REFERENCE_ONLY_KEY: False}, "the stored row keeps it"


def test_metadata_the_host_would_refuse_is_sent_repaired_and_said_so() -> None:
    assert sent_metadata("not a mapping") == (None, True)
    assert sent_metadata({1: "a"}) == ({"1": "a"}, True)
    kept = {"source": "cli"}
    assert sent_metadata(kept) == (kept, False)


async def test_a_view_sends_the_sequence_number_a_message_carries() -> None:
    manager = SimpleContextManager()
    # Text content and a block list: the two ways a view reads a message's fields.
    await manager.add_message({"role": "user", "content": "hi", "metadata": {"_seq": 3}})
    await manager.add_message(
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "and"}],
            "metadata": {"_seq": 4},
        }
    )
    sent = await manager.get_messages_for_request()
    assert [m["metadata"]["_seq"] for m in sent] == [3, 4]
