"""The words every layer shares, importing nothing else of the package: what a message is
(roles, blocks, calls and results, ``_messages``), which result answers which call
(``_pairing``), the events (``_events``), numbers
(``_numbers``), Amplifier's display-only rows (``_public``), names (``_names``), the JSON text
a model reads (``_json_text``) and each call's tool and arguments (``_calls``)."""
