"""Temporal activities and the LangGraph graphs they wrap.

One package per pipeline, plus shared activities.
"""
