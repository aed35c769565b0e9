"""A session's state and the request paths that change it: ``SessionState``, ``Pipeline`` and
``deliver`` (``_session``), the retaining request (``_retention``), the measured request
(``_measured``, staged in ``_measured_transaction``) and the synchronous budget
(``_budget_now``)."""
