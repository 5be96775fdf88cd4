"""The plug-in API: what a pipeline package (``activities/<name>/``) builds on.

A pipeline contributes its graph, its :class:`Pipeline` entry and, optionally, its own HTTP
routes (``Pipeline.router``) and stream protocol (:class:`RunStream`). Everything it needs
from the runtime for those is named here, and a pipeline never imports the API
(``services``) or the workflows (``workflows``): ``make lint`` holds it to that
(import-linter). The names, by what they are for:

- **the contract**: :class:`Pipeline`, :class:`RunStream`, :class:`DecisionRefusedError`
  (a refusal from ``check_decision``);
- **the run service** (:mod:`overseer.runs`): :func:`submit_run` with :class:`Upload`
  (a ``/v1``-shaped submission), or, for a route that records its own submission,
  :func:`run_options` and :func:`start_or_record`; :func:`decide` (a person's
  decision through the run's gate; :func:`send_update` for claims),
  :func:`cancel_run_workflow`, :func:`visible_run` (a run the caller may read,
  :class:`RunRef`);
- **a run's stream** (:mod:`overseer.token_stream`): :func:`durable_items` and
  :func:`merge_live` read the workflow's durable stream and the run's live rows in one
  order; :func:`count_own` counts a stream protocol's live events;
- **HTTP routes** (:mod:`overseer.web`): the dependencies (``PoolDep``, ``SettingsDep``,
  ``TemporalDep``, ``PrincipalDep``, ``SubmitterDep``, ``ReviewerDep``), the caller
  (:class:`Principal`), bounded uploads (:func:`read_bounded`, :func:`parse_metadata`)
  and the ``202`` answer (:class:`RunAccepted`).
"""

from __future__ import annotations

from overseer.access import Principal
from overseer.pipelines import DecisionRefusedError, Pipeline, RunStream
from overseer.runs import (
    RunRef,
    Upload,
    cancel_run_workflow,
    decide,
    run_options,
    send_update,
    start_or_record,
    submit_run,
    visible_run,
)
from overseer.token_stream import count_own, durable_items, merge_live
from overseer.web import (
    PoolDep,
    PrincipalDep,
    ReviewerDep,
    RunAccepted,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
    parse_metadata,
    read_bounded,
)

__all__ = [
    "DecisionRefusedError",
    "Pipeline",
    "PoolDep",
    "Principal",
    "PrincipalDep",
    "ReviewerDep",
    "RunAccepted",
    "RunRef",
    "RunStream",
    "SettingsDep",
    "SubmitterDep",
    "TemporalDep",
    "Upload",
    "cancel_run_workflow",
    "count_own",
    "decide",
    "durable_items",
    "merge_live",
    "parse_metadata",
    "read_bounded",
    "run_options",
    "send_update",
    "start_or_record",
    "submit_run",
    "visible_run",
]
