"""The benchmark's generic user graph (``langgraph.json`` + ``graph.py``), for ``OVERSEER_GRAPHS``.

``graph.py`` is loaded by path from ``langgraph.json``, exactly as a user's project is;
nothing here imports Overseer.
"""
