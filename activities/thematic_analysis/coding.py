"""Coding stage (seed 002 R3.1-R3.3): coders per identity, the code aggregator, the reviewer, codebook edits.

A **code** (one coder's output) is ``{label, definition, terms, quote_ids, count, identity_id,
strategy}``: ``terms`` are the key phrases whose sentences it covers (rules) and
``quote_ids`` are sentences it cites (capped; ``count`` is the full number of sentences).
A **codebook entry** is ``{code_id, label, definition, identities, quote_ids, count, terms,
strategy}``. All steps are deterministic: ties break on labels and ids, never on order of
arrival, so the parallel coders' finishing order never changes the codebook.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from activities.thematic_analysis import nlp
from activities.thematic_analysis.dataset import Corpus
from activities.thematic_analysis.identities import Identity
from activities.thematic_analysis.options import ThematicOptions
from overseer.plugin import DecisionRefusedError, OverseerError


class CodingFailedError(OverseerError):
    """Every coder failed, so there is nothing to aggregate (permanent: the run fails)."""

    code = "coding_failed"
    http_status = 500


# --- coder (rules) ----------------------------------------------------------------------------


def rules_coder(identity: Identity, corpus: Corpus, options: ThematicOptions) -> list[dict[str, Any]]:
    """One identity's codes from TF-IDF key phrases, re-weighted by the identity's lens.

    A phrase scores ``normalised TF-IDF mass × (1 + lens_weight × max(0, cos(phrase, lens) -
    mean cos))``: an identity keeps the frequent phrases close to what it looks for. A
    unigram inside an already-kept bigram that covers most of its sentences is skipped.

    Returns:
        Up to ``codes_per_identity`` codes, best first, each with at least
        ``min_code_count`` sentences.
    """
    table = nlp.phrase_table(corpus)
    terms: list[str] = table["terms"]
    if not terms:
        return []
    lens = nlp.embed([identity.lens])[0]
    relevance = table["embeddings"] @ lens
    mass = table["mass"] / max(float(table["mass"].max()), 1e-9)
    boost = 1.0 + options.lens_weight * np.maximum(0.0, relevance - float(relevance.mean()))
    scores = mass * boost
    order = sorted(range(len(terms)), key=lambda i: (-round(float(scores[i]), 9), terms[i]))
    codes: list[dict[str, Any]] = []
    kept: list[tuple[str, set[str]]] = []
    for i in order:
        if len(codes) >= options.codes_per_identity:
            break
        term = terms[i]
        members = nlp.sentences_with(corpus, [term])
        if len(members) < options.min_code_count:
            continue
        member_set = set(members)
        covering = next((n for n, (other, other_members) in enumerate(kept)
                         if _covered(term, member_set, other, other_members)), None)
        if covering is not None:
            if len(term.split()) > len(kept[covering][0].split()):
                # the longer phrase says more ("customer support" over "support"): it takes the slot
                kept[covering] = (term, member_set)
                codes[covering] = _code(term, members, identity, options)
            continue
        kept.append((term, member_set))
        codes.append(_code(term, members, identity, options))
    return [_with_phrase_label(code, terms, corpus) for code in codes]


def _with_phrase_label(code: dict[str, Any], vocabulary: Sequence[str], corpus: Corpus
                       ) -> dict[str, Any]:
    """Label a one-word code with the two-word phrase most of its sentences use (``side effects``)."""
    word = str(code["label"])
    if " " in word:
        return code
    best: tuple[int, str] | None = None
    for phrase in vocabulary:
        if " " in phrase and word in phrase.split():
            shared = len(nlp.sentences_with(corpus, [phrase]))
            if shared >= 0.6 * int(code["count"]) and (best is None or shared > best[0]):
                best = (shared, phrase)
    if best is None:
        return code
    return {**code, "label": best[1], "definition": code["definition"].replace(word, best[1], 1)}


def _code(term: str, members: list[str], identity: Identity, options: ThematicOptions
          ) -> dict[str, Any]:
    return {
        "label": term,
        "definition": f"Sentences about “{term}” ({identity.name} lens).",
        "terms": [term],
        "quote_ids": members[: options.max_quotes_per_code],
        "count": len(members),
        "identity_id": identity.id,
        "strategy": "rules",
    }


def _covered(term: str, members: set[str], other: str, other_members: set[str]) -> bool:
    words, other_words = set(term.split()), set(other.split())
    if not (words <= other_words or other_words <= words):
        return False
    return len(members & other_members) >= 0.7 * min(len(members), len(other_members))


# --- code aggregator ----------------------------------------------------------------------------


def aggregate_codes(coder_results: Sequence[Mapping[str, Any]], corpus: Corpus,
                    options: ThematicOptions) -> list[dict[str, Any]]:
    """Merge every coder's codes into one codebook (seed 002 R3.2).

    Two codes merge when their labels' embeddings have cosine ≥ ``merge_similarity`` or
    their labels' rapidfuzz ``ratio`` ≥ ``merge_fuzzy_ratio`` (``side effect`` /
    ``side effects``); merging is transitive (union-find). A merged entry keeps the label of
    its most frequent member, the union of terms, cited quotes and identities.

    Returns:
        Codebook entries, most frequent first.
    """
    from rapidfuzz import fuzz

    codes = sorted((dict(c) for r in coder_results for c in r.get("codes", [])),
                   key=lambda c: (str(c["label"]).casefold(), str(c.get("identity_id", ""))))
    if not codes:
        return []
    labels = [str(c["label"]).casefold().strip() for c in codes]
    vectors = nlp.embed(labels)
    similarity = vectors @ vectors.T
    parent = list(range(len(codes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(codes)):
        for j in range(i + 1, len(codes)):
            if find(i) == find(j):
                continue
            if labels[i] == labels[j] or similarity[i, j] >= options.merge_similarity or \
                    fuzz.ratio(labels[i], labels[j]) >= options.merge_fuzzy_ratio:
                parent[max(find(i), find(j))] = min(find(i), find(j))
    groups: dict[int, list[dict[str, Any]]] = {}
    for i, code in enumerate(codes):
        groups.setdefault(find(i), []).append(code)
    entries = [_merge_group(group, corpus, options) for group in groups.values()]
    return _sorted_codebook(entries)


def _merge_group(group: Sequence[Mapping[str, Any]], corpus: Corpus,
                 options: ThematicOptions) -> dict[str, Any]:
    head = max(group, key=lambda c: (int(c.get("count", 0)), -len(str(c["label"])),
                                     str(c["label"])))
    terms = sorted({t for c in group for t in c.get("terms", [])})
    cited = [q for c in group for q in c.get("quote_ids", []) if q in corpus.text]
    members = _members(terms, cited, corpus)
    identities = sorted({str(c["identity_id"]) for c in group if c.get("identity_id")})
    strategies = sorted({str(c.get("strategy", "rules")) for c in group})
    return {
        "code_id": code_id(str(head["label"])),
        "label": str(head["label"]),
        "definition": str(head.get("definition") or ""),
        "identities": identities,
        "quote_ids": _ranked_quotes(members, cited, options.max_quotes_per_code),
        "count": len(members),
        "terms": terms,
        "strategy": strategies[0] if len(strategies) == 1 else "mixed",
    }


def code_id(label: str) -> str:
    """Stable id of a code: ``c_`` + 8 hex of sha256 of the folded label."""
    folded = " ".join(label.casefold().split())
    return "c_" + hashlib.sha256(folded.encode("utf-8")).hexdigest()[:8]


def code_members(code: Mapping[str, Any], corpus: Corpus) -> list[str]:
    """Every sentence a code covers: its terms' sentences plus its cited quotes (corpus order)."""
    return _members(list(code.get("terms", [])), list(code.get("quote_ids", [])), corpus)


def _members(terms: Sequence[str], cited: Sequence[str], corpus: Corpus) -> list[str]:
    found = set(nlp.sentences_with(corpus, terms)) if terms else set()
    found.update(q for q in cited if q in corpus.text)
    return sorted(found, key=corpus.order().__getitem__)


def _ranked_quotes(members: Sequence[str], cited: Sequence[str], limit: int) -> list[str]:
    """Cited quotes first (a model chose them), then the rest in corpus order, one per interaction first."""
    member_set = set(members)
    ordered = list(dict.fromkeys([*[q for q in cited if q in member_set], *members]))
    first: list[str] = []
    seen: set[str] = set()
    for qid in ordered:
        interaction = qid.partition("-")[0]
        if interaction not in seen:
            seen.add(interaction)
            first.append(qid)
    chosen = set(first)
    rest = [q for q in ordered if q not in chosen]
    return [*first, *rest][:limit]


def _sorted_codebook(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, int] = {}
    out = sorted(entries, key=lambda e: (-int(e["count"]), e["label"].casefold(), e["code_id"]))
    for entry in out:  # two labels hashing alike (or folding alike) still get distinct ids
        n = seen.get(entry["code_id"], 0)
        seen[entry["code_id"]] = n + 1
        if n:
            entry["code_id"] = f"{entry['code_id']}_{n}"
    return out


# --- reviewer ------------------------------------------------------------------------------------


def review_codebook(codebook: Sequence[Mapping[str, Any]], corpus: Corpus, options: ThematicOptions,
                    identities: Sequence[Identity]) -> list[dict[str, Any]]:
    """The reviewer's codebook update (seed 002 R3.3).

    Folds a code into a more frequent one when ``overlap_merge`` of its sentences are
    shared (``effects`` into ``side effects``), drops rules codes under ``min_code_count``
    sentences (a model's code needs one verified quote), keeps the ``max_codes`` most
    frequent and writes each definition from its identities and size.

    Returns:
        The reviewed codebook, most frequent first.
    """
    entries = _sorted_codebook([dict(e) for e in codebook])
    kept: list[dict[str, Any]] = []
    member_sets: list[set[str]] = []
    for entry in entries:
        members = set(code_members(entry, corpus))
        target = next((i for i, other in enumerate(member_sets) if members and
                       len(members & other) >= options.overlap_merge * len(members)), None)
        if target is not None:
            host = kept[target]
            host["terms"] = sorted({*host["terms"], *entry.get("terms", [])})
            host["identities"] = sorted({*host["identities"], *entry["identities"]})
            host.setdefault("merged_labels", []).append(entry["label"])
            extra = [q for q in entry["quote_ids"] if q not in host["quote_ids"]]
            host["quote_ids"] = [*host["quote_ids"], *extra][: options.max_quotes_per_code]
            member_sets[target] |= members
            host["count"] = len(member_sets[target])
            continue
        floor = options.min_code_count if entry.get("strategy") == "rules" else 1
        if len(members) < floor:  # a model's code stands on one verified quote
            continue
        kept.append(dict(entry))
        member_sets.append(members)
    names = {i.id: i.name for i in identities}
    for entry in kept:
        who = ", ".join(names.get(i, i) for i in entry["identities"]) or "a coder"
        interactions = len({corpus.interaction_of[q] for q in code_members(entry, corpus)})
        if entry.get("strategy") == "rules" or not entry.get("definition"):
            also = f" (also: {', '.join(entry['merged_labels'])})" if entry.get("merged_labels") else ""
            entry["definition"] = (f"Sentences that mention “{entry['label']}”{also}; coded by "
                                   f"{who}; {entry['count']} sentences in {interactions} interactions.")
    return _sorted_codebook(kept)[: options.max_codes]


# --- codebook edits (the optional human review) --------------------------------------------------


class CodebookEdits(BaseModel):
    """A reviewer's codebook edits (``updates`` of the codebook-review decision).

    Attributes:
        merge: groups of code ids to merge; each group becomes its first code (label kept
            unless renamed), at least two ids per group, no id in two groups.
        rename: code id → new label (non-empty, ≤ 120 characters).
        delete: code ids to drop.
    """

    model_config = ConfigDict(extra="forbid")

    merge: list[list[str]] = Field(default_factory=list)
    rename: dict[str, str] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when there is nothing to change."""
        return not (self.merge or self.rename or self.delete)


def validate_edits(codebook: Sequence[Mapping[str, Any]], updates: Any) -> CodebookEdits:
    """Check ``updates`` against ``codebook``.

    Raises:
        DecisionRefusedError: code ``invalid_codebook_edits`` (422) naming every problem:
            wrong shape, unknown ids, a group of fewer than two, an id in two groups, an id
            both deleted and merged or renamed, an empty or too-long label.
    """
    try:
        edits = CodebookEdits.model_validate(updates or {})
    except ValidationError as err:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or 'updates'}: {e['msg']}"
                    for e in err.errors()]
        raise _refused(problems) from None
    known = {str(e["code_id"]) for e in codebook}
    problems = []
    grouped: set[str] = set()
    for n, group in enumerate(edits.merge):
        if len(set(group)) < 2:
            problems.append(f"merge[{n}]: needs at least two distinct code ids")
        for cid in group:
            if cid in grouped:
                problems.append(f"merge[{n}]: {cid} is already in another merge group")
            grouped.add(cid)
    referenced = [*grouped, *edits.rename, *edits.delete]
    problems += [f"unknown code id {cid}" for cid in sorted(set(referenced) - known)]
    deleted = set(edits.delete)
    problems += [f"{cid} is both deleted and merged or renamed"
                 for cid in sorted(deleted & (grouped | set(edits.rename)))]
    for cid, label in sorted(edits.rename.items()):
        if not label.strip() or len(label) > 120:
            problems.append(f"rename.{cid}: a label needs 1-120 characters")
    if problems:
        raise _refused(problems)
    return edits


def apply_edits(codebook: Sequence[Mapping[str, Any]], edits: CodebookEdits) -> list[dict[str, Any]]:
    """The codebook after deletes, then merges, then renames (pure; edits already validated).

    A merged code keeps its first id; its count is the sum of its members' counts (an upper
    bound where their sentences overlap), its quotes, terms and identities the union.
    """
    by_id = {str(e["code_id"]): dict(e) for e in codebook if e["code_id"] not in set(edits.delete)}
    for group in edits.merge:
        head = by_id[group[0]]
        for cid in group[1:]:
            other = by_id.pop(cid)
            head["quote_ids"] = list(dict.fromkeys([*head["quote_ids"], *other["quote_ids"]]))
            head["terms"] = sorted({*head.get("terms", []), *other.get("terms", [])})
            head["identities"] = sorted({*head["identities"], *other["identities"]})
            head["count"] = int(head["count"]) + int(other["count"])
            head.setdefault("merged_labels", []).append(other["label"])
    for cid, label in edits.rename.items():
        if cid in by_id:
            by_id[cid]["label"] = label.strip()
            by_id[cid]["edited"] = True
    return sorted(by_id.values(), key=lambda e: (-int(e["count"]), e["label"].casefold(), e["code_id"]))


def check_decision(payload: Mapping[str, Any], decision: Mapping[str, Any],
                   state: Mapping[str, Any]) -> None:
    """The pipeline's refusal rule for the codebook review (runs in the update validator).

    Only an ``approve`` carries edits; they must fit the codebook shown in ``payload``
    (``state`` is ``{}``: the pipeline does not read the state at the pause).

    Raises:
        DecisionRefusedError: ``invalid_codebook_edits`` with every problem in ``details``.
    """
    if payload.get("kind") != "codebook_review":
        return
    updates = decision.get("updates")
    if decision.get("decision") == "approve" and updates:
        validate_edits(payload.get("codebook") or [], updates)


def _refused(problems: list[str]) -> DecisionRefusedError:
    return DecisionRefusedError("invalid codebook edits: " + "; ".join(problems[:10]),
                                code="invalid_codebook_edits", details={"problems": problems})
