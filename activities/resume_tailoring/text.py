"""Small text tools shared by the resume_tailoring modules: tokens, a light stemmer, matching.

The stemmer is a deterministic suffix stripper (a subset of Porter's step 1 and 2 rules),
enough for ATS-style matching where "developed", "developing" and "development" should
meet "develop". Fuzzy matching uses ``rapidfuzz`` so "Javascript" meets "JavaScript" and
"Node.js" meets "NodeJS".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from rapidfuzz import fuzz

TOKEN_RE = re.compile(r"[A-Za-z][A-Za-z0-9+#./-]*[A-Za-z0-9+#]|[A-Za-z]")
"""Words, keeping tech tokens whole (``C++``, ``C#``, ``Node.js``, ``CI/CD``)."""

STOPWORDS = frozenset("""
a about above across after again against all also am an and any are as at be because been
before being below between both but by can could did do does doing down during each either
etc few for from further had has have having he her here hers him his how i if in into is it
its itself just may me might more most must my no nor not of off on once only or other our
ours out over own per same shall she should so some such than that the their them then there
these they this those through to too under until up upon us very via was we were what when
where which while who whom why will with within without would you your yours
include includes including includ excludes exclude related various work works working job
ability able strong experience experienced years year plus using use used new well
role roles involves involve looking seeking join joining team teams skilled candidate candidates
ideal opportunity company responsibilities requirements qualifications required preferred
related field fields understanding knowledge great excellent good proven solid must
another one two ensure ensuring provide providing perform performing carry details detail
specific determine determining involving similar other others general
""".split())

FUZZY_THRESHOLD = 90.0
"""rapidfuzz ratio (0–100) above which two keywords are the same (``Javascript``/``JavaScript``)."""

_SUFFIXES = (
    ("ational", "ate"), ("ization", "ize"), ("isation", "ize"), ("fulness", "ful"),
    ("ousness", "ous"), ("iveness", "ive"), ("ements", ""), ("ement", ""), ("ments", ""),
    ("ment", ""), ("ations", "ate"), ("ation", "ate"), ("ities", ""), ("ity", ""),
    ("ingly", ""), ("ings", ""), ("ing", ""), ("edly", ""), ("ies", "y"), ("ied", "y"),
    ("ers", ""), ("er", ""), ("ed", ""), ("es", ""), ("s", ""),
)


def tokens(text: str) -> list[str]:
    """Word tokens of ``text``, original case, trailing punctuation removed."""
    text = re.sub(r"(?<=[A-Za-z])['’]s\b", "", text or "")
    return [t.rstrip(".") for t in TOKEN_RE.findall(text)]


def stem(word: str) -> str:
    """A light, deterministic stem of one lower-cased word (``developing`` → ``develop``)."""
    w = word.lower()
    if len(w) <= 3 or not w.isalpha():
        return w
    for suffix, repl in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: len(w) - len(suffix)] + repl
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    return w


def stems(text: str) -> list[str]:
    """Stems of the content words of ``text`` (stopwords dropped)."""
    return [stem(t) for t in tokens(text) if t.lower() not in STOPWORDS]


def norm(text: str) -> str:
    """Lower-case, collapse spaces, drop punctuation except tech marks (``+#.``)."""
    return re.sub(r"\s+", " ", re.sub(r"[^a-z0-9+#. ]", " ", (text or "").lower())).strip(" .")


def phrase_key(phrase: str) -> str:
    """Canonical key of a keyphrase: its content stems joined (``Web Developers`` → ``web develop``)."""
    return " ".join(stems(phrase)) or norm(phrase)


def phrase_in(phrase: str, haystack_stems: set[str], haystack_norm: str,
              lines: list[set[str]] | None = None) -> bool:
    """True when every content stem of ``phrase`` is in the haystack, or it fuzzily appears.

    Args:
        phrase: a keyword or keyphrase (``"web applications"``, ``"Node.js"``).
        haystack_stems: stems of the text searched (:func:`stems` as a set).
        haystack_norm: the text searched, :func:`norm`-alised.
        lines: stems of each line of the text; when given, a phrase of several words must
            have all its stems on one line (one bullet, one skill group), not scattered.
    """
    key = stems(phrase)
    if key and all(s in haystack_stems for s in key):
        if lines is None or len(set(key)) == 1 or any(set(key) <= line for line in lines):
            return True
    n = norm(phrase)
    if not n:
        return False
    if len(n) <= 3:
        return re.search(rf"(?<![a-z0-9]){re.escape(n)}(?![a-z0-9])", haystack_norm) is not None
    return fuzzy_contains(n, haystack_norm)


def fuzzy_contains(needle: str, haystack: str) -> bool:
    """``needle`` appears in ``haystack`` up to small spelling differences.

    Compares the needle with every window of the same number of words (rapidfuzz ratio),
    never with arbitrary substrings, so "react" does not meet "create".
    """
    if re.search(rf"(?<![a-z0-9]){re.escape(needle)}(?![a-z0-9])", haystack):
        return True
    words = haystack.split()
    size = len(needle.split())
    compact = needle.replace(" ", "").replace(".", "")
    for i in range(len(words) - size + 1):
        window = " ".join(words[i : i + size])
        if window.replace(" ", "").replace(".", "") == compact:
            return True
        if len(needle) >= 5 and fuzz.ratio(needle, window) >= FUZZY_THRESHOLD:
            return True
    return False


def same_term(a: str, b: str) -> bool:
    """Two short terms (skills, names) are the same up to case, punctuation and small typos."""
    na, nb = norm(a), norm(b)
    if not na or not nb:
        return False
    if na == nb or na.replace(" ", "").replace(".", "") == nb.replace(" ", "").replace(".", ""):
        return True
    return min(len(na), len(nb)) >= 5 and fuzz.ratio(na, nb) >= FUZZY_THRESHOLD


def any_same(term: str, pool: Iterable[str]) -> bool:
    """True when ``term`` is :func:`same_term` as one of ``pool``."""
    return any(same_term(term, p) for p in pool)


def jaccard(a: set[str], b: set[str]) -> float:
    """Jaccard overlap of two sets (0 when both are empty)."""
    return len(a & b) / len(a | b) if a or b else 0.0
