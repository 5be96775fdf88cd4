"""The thematic_analysis pipeline (seed 002, Thematic-LM): coders per identity, codebook, themes.

Modules: ``identities`` (identities.yaml, loaded once per process), ``dataset`` (CSV/JSONL
parsing, windowing, sentences and their quote ids), ``nlp`` (offline embeddings, key phrases,
sentiment), ``coding`` (coders, code aggregator, reviewer, codebook edits), ``themes`` (theme
coders and aggregator), ``llm_steps`` (the model strategy), ``nodes``/``graph``/``state``
(the LangGraph graph), ``report`` (Markdown report) and ``pipeline`` (the plug-in).
"""
