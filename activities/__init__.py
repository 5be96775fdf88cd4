"""Temporal activities and the LangGraph graphs they wrap: one package per pipeline, plus shared activities."""
