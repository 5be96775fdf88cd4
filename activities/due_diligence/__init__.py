"""The ``due_diligence`` pipeline (seed 004): contract review by five agents in a fixed order.

``ingestion → clause_extraction → risk_scoring → summary → checklist (→ signoff)``.
Pure domain logic lives in :mod:`.ingest`, :mod:`.clauses`, :mod:`.risk`, :mod:`.summary`,
:mod:`.checklist` and :mod:`.report`; :mod:`.nodes` wraps them as graph nodes,
:mod:`.graph` wires them, and :mod:`.pipeline` registers the plug-in.
"""
