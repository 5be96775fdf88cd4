"""The rendered report of a finished analysis: Markdown with representative quotes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def render_report(state: Mapping[str, Any], quotes: Mapping[str, str], *,
                  quotes_per_theme: int = 3) -> str:
    """Markdown report of a run's final state.

    Args:
        state: the final graph state (or the run's result with the same keys).
        quotes: quote id → sentence (from :func:`dataset.quotes_for`); missing ids are
            shown as ids.
        quotes_per_theme: representative quotes shown under each theme.

    Returns:
        Markdown: window, themes (prevalence, sentiment, codes, quotes), codebook table,
        token usage, durations, strategies used, fallbacks to the rules, errors.
    """
    dataset = state.get("dataset") or {}
    themes = state.get("themes") or []
    codebook = state.get("codebook") or []
    by_code = {c["code_id"]: c for c in codebook}
    lines = [
        f"# Thematic analysis — {dataset.get('account_id', state.get('account_id', '?'))}",
        "",
        f"Window {dataset.get('start_date', '?')} to {dataset.get('end_date', '?')}: "
        f"{dataset.get('interactions', 0)} interactions, {dataset.get('sentences', 0)} "
        f"quotable sentences. Strategy: `{state.get('strategy', 'rules')}`. "
        f"Outcome: `{state.get('outcome', '?')}`.",
        "",
        f"## Themes ({len(themes)})",
        "",
    ]
    if not themes:
        reason = {"codebook_rejected": "the codebook was rejected.",
                  "no_themes": "the theme coders grouped none of the codes."}.get(
            str(state.get("outcome")), "no codes were found in the window.")
        lines += ["No themes: " + reason, ""]
    for n, theme in enumerate(themes, start=1):
        sentiment = theme.get("sentiment") or {}
        labels = [by_code[c]["label"] for c in theme.get("code_ids", []) if c in by_code]
        lines += [
            f"### {n}. {theme['name']}",
            "",
            f"- prevalence: {theme.get('prevalence', 0):.0%} of interactions "
            f"({theme.get('interactions', 0)}), sentiment {sentiment.get('label', '?')} "
            f"(VADER {sentiment.get('compound', 0):+.2f})",
            f"- codes: {', '.join(labels) or '—'}",
            f"- identities: {', '.join(theme.get('identities', [])) or '—'}",
            "",
        ]
        for qid in theme.get("quote_ids", [])[:quotes_per_theme]:
            text = quotes.get(qid)
            lines.append(f"> {_one_line(text)} `{qid}`" if text else f"> `{qid}`")
            lines.append("")
    lines += ["## Codebook", "", "| code | label | count | identities |", "| --- | --- | ---: | --- |"]
    for code in codebook:
        lines.append(f"| `{code['code_id']}` | {_cell(code['label'])} | {code['count']} | "
                     f"{', '.join(code.get('identities', []))} |")
    usage = state.get("token_usage") or {}
    durations = state.get("durations_ms") or {}
    lines += ["", "## Run", "",
              f"- tokens: {usage.get('total_tokens', 0)} ({usage.get('calls', 0)} calls, "
              f"${usage.get('cost_usd', 0.0):.4f})",
              "- durations: " + (", ".join(f"{k} {v} ms" for k, v in durations.items()) or "—")]
    if state.get("strategies"):
        lines.append("- strategies used: " + ", ".join(f"`{n}`" for n in state["strategies"]))
    for fallback in state.get("fallbacks") or []:
        lines.append(f"- {fallback.get('node')} ({fallback.get('identity_id')}) used the rules: "
                     f"the model's reply was unusable (`{fallback.get('code')}`)")
    for error in state.get("errors") or []:
        lines.append(f"- error in {error.get('node')} ({error.get('identity_id')}): "
                     f"`{error.get('code')}`")
    for warning in state.get("warnings") or []:
        lines.append(f"- warning: `{warning}`")
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
