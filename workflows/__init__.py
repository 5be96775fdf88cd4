"""Temporal workflows: deterministic, no I/O; every run is one ``SegmentRunWorkflow``.

- :mod:`.segment_run`: the run's workflow and its loop of segments, composed of
  :mod:`.segment_calls` (the ``run_segment`` activity with its placement, time-outs and
  retries), :mod:`.approval` (the human-approval gate), :mod:`.decisions`, :mod:`.budget`,
  :mod:`.recorder` (the event log and status), :mod:`.durable_stream`, :mod:`.children`
  (a submission of several parts) and :mod:`.run_state` (what crosses continue-as-new).
- :mod:`.cron_tick` and :mod:`.thread_ttl`: a cron's tick and a thread's ttl timer.
"""
