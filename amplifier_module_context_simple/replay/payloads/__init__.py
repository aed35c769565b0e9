"""What each recorded request held: its payload by category, beside the provider's usage.

Imports only ``recordings`` below it.

* ``payload``: what one recorded request held, by category (the window by category), beside
  the provider's usage.
* ``payload_match``: the payload matched to the transcript (conversation or injection).
* ``space_parts``: the tool definitions per tool and the system prompt per recorded part.
"""
