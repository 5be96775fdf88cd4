"""The local stack: Postgres, the Temporal dev server, the worker and the API as child processes.

:mod:`.embedded` starts Postgres and Temporal, :mod:`.supervisor` keeps the worker and the API
running for ``overseer run``, :mod:`.managed` gives benches and fault tests handles on every part.
"""
