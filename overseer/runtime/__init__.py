"""The worker's runtime: the activities that run graphs, and the library their nodes use.

- **Segments**: :mod:`.segments` (``run_segment``: LangGraph's loop from its start, or from
  an answered interrupt, to the next interrupt or the end, on the thread's checkpoints),
  with :mod:`.segment_call`, :mod:`.segment_setup`, :mod:`.segment_stream`
  (its live stream), :mod:`.segment_guards` (the run's LLM budget, a one-step barrier),
  :mod:`.segment_record` (one ``node.completed`` per node) and :mod:`.segment_ending` (a
  run's ending).
- **Node library** (re-exported to pipelines by :mod:`overseer.plugin`): :mod:`.events`
  (an activity's event-log writes), :mod:`.graph_nodes` (a node's chat-model meter, ledger
  and errors),
  :mod:`.llm` (model choice, calls, their cost), :mod:`.heartbeat`, :mod:`.retry`,
  :mod:`.errors` (Overseer errors as Temporal's), :mod:`.document_pages`.
- **Housekeeping activities**: :mod:`.crons` (a cron tick, a stateless run's clean-up, a
  thread's ttl) and :mod:`.notify` (webhooks).

It sits above the run service (a run's end hands the thread to its next queued run) and
below :mod:`overseer.plugin`; ``make lint`` keeps that order.
"""
