"""The performance benchmark (``make bench``): Overseer beside its peers, as ratios.

``scenarios`` holds the six scenarios of docs/performance.md plus the Temporal floor and worker
scaling; ``baselines`` the peers (plain LangGraph + ``AsyncPostgresSaver``, bare
Tesseract in a process pool); ``harness`` the handle on an embedded stack; ``loadgen``
the open-loop HTTP load generator (its own process); ``stats`` and ``report`` the
percentile/ratio arithmetic and the output. Never run as a timed test.
"""
