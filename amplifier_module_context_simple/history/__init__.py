"""The history as stored and indexed: admission (``_admission``, ``_ingress``, the shapes
warned about in ``_shape_warnings``), each message's projection onto the host's model
(``_project``, ``_ids``, ``_plain``), the turns a provider reads (``_turn_rule``) and the
index of facts every view is built from (``_history``)."""
