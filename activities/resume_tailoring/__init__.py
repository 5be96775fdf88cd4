"""Seed 001 resume_tailoring: a supervisor graph that tailors a JSON Resume to a job, honestly.

``pipeline.py`` (the plug-in), ``graph.py`` (supervisor, routing, human review), ``state.py``,
``nodes.py`` (agents), and the domain: ``jobs.py`` (job parsing, TF-IDF keyphrases over
O*NET), ``resume.py`` (JSON Resume I/O, schema, Markdown, diff), ``ats.py`` (score),
``drafting.py`` (rules drafter), ``reflexion.py`` (directives), ``honesty.py`` (the
no-invention check), ``llm_drafting.py`` (optional model drafter).
"""
