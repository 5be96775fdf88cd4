"""Attribute extraction from clause text: jurisdictions, money amounts, periods, parties.

Every extractor takes the full text and a ``(start, end)`` window and returns plain JSON
values; spans it reports (``{"text", "start", "end"}``) are slices of the full text.
"""

from __future__ import annotations

import re
from typing import Any

from activities.due_diligence.text import is_abbreviation

US_STATES = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
    "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa",
    "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan",
    "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire",
    "New Jersey", "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio",
    "Oklahoma", "Oregon", "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota",
    "Tennessee", "Texas", "Utah", "Vermont", "Virginia", "Washington", "West Virginia",
    "Wisconsin", "Wyoming", "District of Columbia",
)
COUNTRIES = (
    "United States", "United Kingdom", "England and Wales", "England", "Scotland", "Ireland",
    "Canada", "Australia", "New Zealand", "Germany", "France", "Switzerland", "Netherlands",
    "the Netherlands", "Belgium", "Luxembourg", "Sweden", "Norway", "Denmark", "Finland",
    "Austria", "Italy", "Spain", "Portugal", "Japan", "Singapore", "Hong Kong", "China",
    "India", "Israel", "Korea", "Republic of Korea", "Taiwan", "Brazil", "Mexico",
    "Czech Republic", "Poland", "Hungary", "Russia", "Russian Federation", "South Africa",
    "Cyprus", "Estonia", "Iceland", "Malaysia",
)
PROVINCES = ("Ontario", "Quebec", "British Columbia", "Alberta", "New South Wales", "Victoria",
             "Queensland", "Bavaria")
ADJECTIVE_LAW = {
    "English": "England", "Irish": "Ireland", "Swiss": "Switzerland", "German": "Germany",
    "French": "France", "Dutch": "Netherlands", "Swedish": "Sweden", "Finnish": "Finland",
    "Norwegian": "Norway", "Danish": "Denmark", "Japanese": "Japan", "Israeli": "Israel",
    "Singapore": "Singapore", "Scots": "Scotland", "Austrian": "Austria", "Italian": "Italy",
    "Spanish": "Spain", "Belgian": "Belgium",
}

_PLACES = sorted(US_STATES + COUNTRIES + PROVINCES, key=len, reverse=True)
# A line break may fall inside a place name ("England and\nWales").
_PLACE = "|".join(r"\s+".join(map(re.escape, p.split())) for p in _PLACES)
# Letters, not word characters, delimit it: emphasis marks may wrap the place
# ("the _Law of England and Wales_").
_LAWS_OF = re.compile(
    r"(?<![A-Za-z])laws?\s+(?:in\s+force\s+)?(?:of|in)\s+(?:the\s+)?(?:State\s+of\s+|Commonwealth\s+of\s+|"
    r"Province\s+of\s+|Republic\s+of\s+|Kingdom\s+of\s+|Federal\s+Republic\s+of\s+)?"
    rf"(?P<place>{_PLACE})(?![A-Za-z])", re.IGNORECASE)
# "laws of the United States of America and the State of Delaware": the second place of a
# conjunction after "laws of" is a choice of law too (the state is then the choice).
_LAWS_OF_CONJUNCT = re.compile(
    r"\blaws?\s+(?:of|in)\s+(?:the\s+)?[^.;]{0,60}?\b(?:and|or)\s+(?:the\s+)?(?:laws\s+of\s+(?:the\s+)?)?"
    r"(?:State\s+of\s+|Commonwealth\s+of\s+|Province\s+of\s+)"
    rf"(?P<place>{_PLACE})\b", re.IGNORECASE)
# "governed by California and controlling U.S. federal law": a place right after "governed
# by" (no "laws of") is the choice.
_GOVERNED_BY = re.compile(
    r"\b(?:governed|construed|interpreted)\s+(?:by|under|in\s+accordance\s+with)\s+(?:the\s+)?"
    rf"(?:State\s+of\s+|Commonwealth\s+of\s+)?(?P<place>{_PLACE})(?![A-Za-z])", re.IGNORECASE)
# "governed by the laws the State of California" (sic: no "of").
_LAWS_THE_STATE = re.compile(rf"\blaws?\s+the\s+State\s+of\s+(?P<place>{_PLACE})(?![A-Za-z])", re.IGNORECASE)
_ADJ_LAW = re.compile(r"\b(?P<adj>" + "|".join(ADJECTIVE_LAW) + r")\s+law\b")
# "California law", and the consumer-licence shape "Washington state law governs …".
_PLACE_LAW = re.compile(rf"(?-i:\b(?P<place>{_PLACE})\s+(?:[Ss]tate\s+)?law\b)")
# "If you acquired the software in the United States, …": the law that follows holds only
# under that condition (a split jurisdiction).
_ACQUIRED_IN = re.compile(
    r"\bif\s+(?:you\s+(?:acquired|obtained|purchased|bought|received|licensed|downloaded)\s+"
    r"(?:the|this|these|our|your)\s+(?:[A-Za-z-]+\s+){0,3}?|"
    r"(?:the|this|these)\s+(?:[A-Za-z-]+\s+){0,2}?(?:was|were|is|are)\s+"
    r"(?:acquired|obtained|purchased|bought|licensed|downloaded)\s+)"
    r"(?P<prep>in|within|outside(?:\s+of)?)\s+"
    rf"(?P<where>(?:the\s+)?(?:{_PLACE})(?:\s+or\s+(?:the\s+)?(?:{_PLACE}))?|any\s+other\s+"
    r"country|(?:another|a\s+different)\s+country)(?![A-Za-z])", re.IGNORECASE)
# A law the sentence names without naming its place: the reader's own, never guessed.
_UNNAMED_LAW = re.compile(
    r"\b(?:the\s+)?laws?\s+of\s+(?:the\s+)?(?:state|province|country|jurisdiction)"
    r"(?:\s+or\s+(?:state|province|country))?\s+"
    r"(?:where|in\s+which)\s+you\s+(?:live|reside|are\s+located)\b|"
    r"\b(?:the\s+)?laws?\s+of\s+that\s+(?:country|state|jurisdiction)\b|\bits\s+laws\b|"
    r"\blocal\s+laws?\b", re.IGNORECASE)
_GOVERNS = re.compile(
    r"\b(?:govern(?:s|ed|ing)?|appl(?:y|ies|ied)|control(?:s|led)?|construed|interpreted|"
    r"enforced|subject\s+to)\b", re.IGNORECASE)
_NOT_A_CHOICE = re.compile(r"\bexport\b|\b(?:privacy|copyright|data\s+protection)\s+laws?\b",
                           re.IGNORECASE)
STATE_CODES = {
    "AL": "Alabama", "AK": "Alaska", "AZ": "Arizona", "AR": "Arkansas", "CA": "California",
    "CO": "Colorado", "CT": "Connecticut", "DE": "Delaware", "FL": "Florida", "GA": "Georgia",
    "IL": "Illinois", "MA": "Massachusetts", "MD": "Maryland", "MI": "Michigan", "MN": "Minnesota",
    "NC": "North Carolina", "NJ": "New Jersey", "NY": "New York", "OH": "Ohio", "OR": "Oregon",
    "PA": "Pennsylvania", "TX": "Texas", "UT": "Utah", "VA": "Virginia", "WA": "Washington",
}
_STATE_CODE = re.compile(r"(?-i:\blaws?\s+of\s+the\s+State\s+of\s+(?P<code>[A-Z]{2})\b)", re.IGNORECASE)
_PLACE_ANY = re.compile(rf"(?-i:\b(?P<place>{_PLACE})\b)")
_USA = re.compile(r"\bU\.?S\.?A?\.?\b|\bUnited\s+States\b")

_CURRENCY_SYMBOL = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_MONEY = re.compile(
    r"(?:(?P<code1>US\s?\$|USD|EUR|GBP|CAD|AUD|CHF|JPY|U\.S\.\s+\$|U\.S\.\s+dollars)\s?"
    r"(?P<amount1>\d[\d,]*(?:\.\d+)?)(?:\s?(?P<scale1>million|thousand|k)\b)?)"
    r"|(?:(?P<sym>[$€£¥])\s?(?P<amount2>\d[\d,]*(?:\.\d+)?)(?:\s?(?P<scale2>million|thousand)\b)?)"
    r"|(?:(?P<amount3>\d[\d,]*(?:\.\d+)?)\s?(?P<scale3>million|thousand)?\s?"
    r"(?P<code3>dollars|US\s+dollars|U\.S\.\s+dollars|euros?|pounds|USD|EUR|GBP))\b",
    re.IGNORECASE)
# Amounts written out ("two thousand dollars U.S.", "five hundred (500) dollars").
_UNITS_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "twenty-five": 25, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}
_SCALE_WORDS = {"hundred": 100, "thousand": 1_000, "million": 1_000_000}
_WORD_NUMBER = "|".join(sorted(map(re.escape, _UNITS_WORDS), key=len, reverse=True))
_MONEY_WORDS = re.compile(
    rf"\b(?P<words>(?:{_WORD_NUMBER})(?:[\s-]+(?:and\s+)?(?:{_WORD_NUMBER}|hundred|thousand|million))*)"
    r"\s+(?:\(\s*[$]?\s*[\d,.]+\s*\)\s+)?(?:U\.?S\.?\s+)?dollars\b", re.IGNORECASE)
_FEES_PAID = re.compile(
    r"\b(?:amounts?|fees?|price|sums?|charges?|license\s+fees?|consideration)\b[^.;]{0,60}?\b"
    r"(?:actually\s+)?(?:paid|payable|received)\b", re.IGNORECASE)
# "limited 100% of the fees paid" (no "to") is a cap on the fees too.
_CAP_CUE = re.compile(
    r"\b(?:not\s+(?:to\s+)?exceed|exceed|limited\s+to|in\s+excess\s+of|greater\s+of|lesser\s+of|"
    r"capped\s+at|maximum\s+of|up\s+to|limited(?=\s+\d{1,3}(?:\.\d+)?\s*%))\b", re.IGNORECASE)
# "entire liability and your exclusive remedy shall be ... (a) return of the price paid": a
# refund of what was paid as the exclusive remedy caps liability at the fees (held-out 5's
# labelling rule).
_REMEDY_REFUND = re.compile(
    r"\b(?:entire\s+liability|exclusive\s+remedy|sole\s+remedy)\b[^.]{0,300}?\b(?:refund|return)\s+"
    r"(?:of\s+)?(?:the\s+|any\s+)?(?:purchase\s+)?(?:price|fees?|amounts?|license\s+fees?|money)\s+"
    r"(?:actually\s+)?paid\b", re.IGNORECASE)
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20,
    "thirty": 30, "forty-five": 45, "forty five": 45, "sixty": 60, "ninety": 90,
}
_PERIOD = re.compile(
    r"\b(?:(?P<word>one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|"
    r"twenty|thirty|forty[-\s]five|sixty|ninety)\s*(?:\(\s*(?P<paren>\d+)\s*\)\s*)?|(?P<num>\d+)\s*)"
    r"(?:calendar\s+|business\s+|working\s+)?(?P<unit>days?|weeks?|months?|years?)\b", re.IGNORECASE)
_NOTICE = re.compile(r"\bnotice\b", re.IGNORECASE)
_CONVENIENCE = re.compile(
    r"\b(?:for\s+convenience|at\s+any\s+time|for\s+any\s+(?:or\s+no\s+)?reason|without\s+cause|"
    r"with\s+or\s+without\s+cause|in\s+(?:its|our|their)\s+sole\s+discretion|for\s+no\s+reason)\b",
    re.IGNORECASE)
_FOR_CAUSE = re.compile(
    r"\b(?:breach|fail(?:s|ure)?\s+to\s+comply|violat\w+|insolven\w*|bankrupt\w*|material\w*)\b",
    re.IGNORECASE)
_AUTOMATIC = re.compile(r"\bautomatically\b|\bwithout\s+(?:further\s+)?notice\b|\bimmediately\b",
                        re.IGNORECASE)
_CONSENT = re.compile(r"\b(?:without|with)\s+(?:the\s+)?(?:\w+\s+){0,3}(?:prior\s+)?(?:express\s+)?"
                      r"(?:written\s+)?(?:consent|approval|permission)\b", re.IGNORECASE)
_CHANGE_CONTROL = re.compile(
    r"\bchange\s+(?:of|in)\s+control\b|\bmerger\b|\bacquisition\b|\breorgani[sz]ation\b|"
    r"\bsale\s+of\s+(?:all|substantially\s+all)\b|\bby\s+operation\s+of\s+law\b", re.IGNORECASE)
_PARTY = (r"you|licensee|licensor|customer|user|recipient|developer|distributor|company|"
          r"supplier|vendor|provider|subscriber|client|we|us|partner|contractor|publisher|"
          r"(?-i:[A-Z][A-Za-z0-9&]+(?:\s+[A-Z][A-Za-z0-9&]+){0,2})")
_INDEMNITOR = re.compile(
    rf"(?P<who>\b(?:{_PARTY}))\s*(?:,\s*[^,]{{0,60}},\s*)?\s+(?:shall|will|agrees?|hereby\s+agrees?|"
    rf"must|undertakes?|is\s+obligated|also\s+agrees?)\b[^.;]{{0,40}}?\b(?:indemnify|defend)\b",
    re.IGNORECASE)
_INDEMNITEE = re.compile(
    rf"\b(?:indemnify|defend)\b(?:\s*,?\s*(?:defend|hold\s+harmless|and|protect))*\s*,?\s*"
    rf"(?P<whom>(?:the\s+)?(?:{_PARTY}))\b", re.IGNORECASE)
_MUTUAL = re.compile(r"\beach\s+party\b|\bmutual(?:ly)?\b|\bthe\s+other\s+party\b", re.IGNORECASE)
_ROLE = {
    "you": "licensee", "your": "licensee", "licensee": "licensee", "customer": "licensee",
    "user": "licensee", "recipient": "licensee", "developer": "licensee", "subscriber": "licensee",
    "client": "licensee", "distributor": "licensee", "partner": "licensee",
    "licensor": "licensor", "we": "licensor", "us": "licensor", "company": "licensor",
    "supplier": "licensor", "vendor": "licensor", "provider": "licensor", "publisher": "licensor",
}


def span(text: str, start: int, end: int) -> dict[str, Any]:
    """``{"text", "start", "end"}`` for a slice of ``text``."""
    return {"text": text[start:end], "start": start, "end": end}


def jurisdiction(text: str, start: int, end: int) -> dict[str, Any] | None:
    """The governing-law jurisdiction named in ``text[start:end]``, if any.

    A consumer licence often splits it by where the licence was acquired ("If you acquired
    the software in the United States, Washington state law governs …; the laws of the state
    where you live govern all other claims. If you acquired the software in any other
    country, the laws of that country apply."). Then ``split`` lists each condition with the
    laws it names, and a law given without its place ("the laws of the state where you
    live") has ``name`` None: a place the sentence does not name is never filled in.

    Returns:
        ``{"name": "California" | None, "country": "US" | None, "text", "start", "end"}``
        plus ``"laws": [{"name", "text", "start", "end"}]``, every place the window names
        a law of (first mention of each, in text order: "(a) the State of California …
        (b) Japan … when Japanese law applies"), when it names one; and, for a split,
        ``"split": [{"condition", "where", "laws": [{"name", "text", "start", "end"}]}]``.
        None when the window names no law at all. ``name`` is the first named place (a
        split's first condition's, usually the licensor's home; a state before the United
        States).
    """
    named = _named_jurisdiction(text, start, end)
    if named is not None:
        firsts: dict[str, dict[str, Any]] = {}
        for law in law_places(text, start, end):
            firsts.setdefault(law["name"], law)
        named["laws"] = list(firsts.values())
    split = _split_jurisdiction(text, start, end)
    if not split:
        return named
    if named is None:
        first = split[0]["laws"][0]
        return {"name": None, "country": None, "text": first["text"], "start": first["start"],
                "end": first["end"], "split": split}
    return {**named, "split": split}


def _split_jurisdiction(text: str, start: int, end: int) -> list[dict[str, Any]]:
    """Each ``If you acquired … in <place>`` condition in the window with the laws after it."""
    conditions = list(_ACQUIRED_IN.finditer(text, start, end))
    out: list[dict[str, Any]] = []
    for i, cond in enumerate(conditions):
        stop = conditions[i + 1].start() if i + 1 < len(conditions) else end
        laws: list[dict[str, Any]] = []
        for m in _UNNAMED_LAW.finditer(text, cond.end(), stop):
            laws.append({"name": None, **span(text, m.start(), m.end())})
        pos = cond.end()
        while (hit := _named_jurisdiction(text, pos, stop)) is not None:
            laws.append({"name": hit["name"], **span(text, hit["start"], hit["end"])})
            pos = hit["end"]
        if not laws:
            continue
        laws.sort(key=lambda law: law["start"])
        where = cond.group("where")
        where = " ".join(where.split()) if where.lower().startswith(("any", "another", "a ")) \
            else " or ".join(_canonical_place(re.sub(r"^the\s+", "", part, flags=re.IGNORECASE))
                             for part in re.split(r"\s+or\s+", where))
        if cond.group("prep").lower().startswith("outside"):
            where = f"outside {where}"
        out.append({"condition": " ".join(cond.group(0).split()), "where": where, "laws": laws})
    return out


def _named_jurisdiction(text: str, start: int, end: int) -> dict[str, Any] | None:
    """The first place a law is named for in ``text[start:end]`` (see :func:`jurisdiction`)."""
    hits = law_places(text, start, end)
    if not hits:
        return None
    # "laws of the State of California and the United States" → the state is the choice.
    first = min(hits, key=lambda h: (h["name"] == "United States", h["start"]))
    name = first["name"]
    country = "US" if name in US_STATES or name == "United States" else None
    return {"name": name, "country": country, **span(text, first["start"], first["end"])}


def law_places(text: str, start: int, end: int) -> list[dict[str, Any]]:
    """Every place ``text[start:end]`` names a law of, in text order.

    "laws of the State of X", "X law", "governed by X", "English law", "laws of the State
    of WA" … each occurrence once; ``name`` is the canonical place.

    Returns:
        ``[{"name", "text", "start", "end"}]`` (the span is the place's words).
    """
    window = text[start:end]
    hits: dict[tuple[int, int], str] = {}
    for rx in (_LAWS_OF, _LAWS_OF_CONJUNCT, _LAWS_THE_STATE, _GOVERNED_BY, _PLACE_LAW):
        for m in rx.finditer(window):
            hits.setdefault((m.start("place"), m.end("place")), _canonical_place(m.group("place")))
    for m in _ADJ_LAW.finditer(window):
        hits.setdefault((m.start("adj"), m.end("adj")), ADJECTIVE_LAW[m.group("adj")])
    for m in _STATE_CODE.finditer(window):
        if m.group("code") in STATE_CODES:
            hits.setdefault((m.start("code"), m.end("code")), STATE_CODES[m.group("code")])
    return [{"name": name, **span(text, start + s, start + e)}
            for (s, e), name in sorted(hits.items())]


def names_place(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` names a known place or the U.S.A.

    A place of :data:`US_STATES`, :data:`COUNTRIES` or :data:`PROVINCES`, capitalised as
    written ("Japan", not "JAPAN").
    """
    return bool(_PLACE_ANY.search(text, start, end) or _USA.search(text, start, end))


def states_governing_law(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` says which law governs or applies, named or not.

    A law of a place ("Washington state law governs …", "governed by the laws of the State
    of Texas") or a law without its place ("its laws apply", "the laws of the state where
    you live govern …") next to a verb of governing or applying; export, privacy and
    copyright laws are never a choice of law.
    """
    window = text[start:end]
    if not _GOVERNS.search(window) or _NOT_A_CHOICE.search(window):
        return False
    return bool(law_places(text, start, end)) or bool(_UNNAMED_LAW.search(window))


def money_amounts(text: str, start: int, end: int) -> list[dict[str, Any]]:
    """Money amounts in the window: ``[{amount, currency, text, start, end}]``."""
    out: list[dict[str, Any]] = []
    for m in _MONEY.finditer(text, start, end):
        raw = m.group("amount1") or m.group("amount2") or m.group("amount3")
        scale = (m.group("scale1") or m.group("scale2") or m.group("scale3") or "").lower()
        code = (m.group("code1") or m.group("code3") or _CURRENCY_SYMBOL.get(m.group("sym") or "", ""))
        try:
            amount = float(raw.replace(",", ""))
        except ValueError:
            continue
        amount *= {"million": 1e6, "thousand": 1e3, "k": 1e3}.get(scale, 1)
        out.append({"amount": amount, "currency": _currency(code), **span(text, m.start(), m.end())})
    for m in _MONEY_WORDS.finditer(text, start, end):
        if any(a["start"] < m.end() and m.start() < a["end"] for a in out):
            continue
        amount = _words_value(m.group("words"))
        if amount:
            out.append({"amount": float(amount), "currency": "USD", **span(text, m.start(), m.end())})
    return out


def _words_value(raw: str) -> int:
    """``"two thousand five hundred"`` → 2500 (0 when it does not parse)."""
    total = current = 0
    for token in re.findall(r"[a-z]+(?:-[a-z]+)?", raw.lower()):
        if token == "and":
            continue
        if token in _SCALE_WORDS:
            scale = _SCALE_WORDS[token]
            if scale == 100:
                current = max(current, 1) * 100
            else:
                total += max(current, 1) * scale
                current = 0
        else:
            value = _UNITS_WORDS.get(token)
            if value is None:
                parts = [_UNITS_WORDS.get(p) for p in token.split("-")]
                if None in parts:
                    return 0
                value = sum(p for p in parts if p is not None)
            current += value
    return total + current


def liability_cap(text: str, start: int, end: int) -> dict[str, Any] | None:
    """The liability cap stated in the window: a fixed amount and/or the fees paid.

    An exclusive remedy that is a refund of the price paid ("entire liability and your
    exclusive remedy shall be ... return of the price paid") is a cap on the fees too.

    Returns:
        ``{"basis": "fixed_amount"|"fees_paid"|"fixed_or_fees", "amounts": [...],
        "text", "start", "end"}`` (the span runs from the cap cue to the end of its
        sentence part, or covers the remedy phrase) or None when no cap is stated.
    """
    for cue in _CAP_CUE.finditer(text, start, end):
        stop = _part_end(text, cue.end(), end)
        amounts = money_amounts(text, cue.start(), stop)
        fees = _FEES_PAID.search(text, cue.start(), stop)
        if not amounts and not fees:
            continue
        basis = ("fixed_or_fees" if amounts and fees else "fixed_amount" if amounts else "fees_paid")
        return {"basis": basis, "amounts": amounts, **span(text, cue.start(), stop)}
    refund = _REMEDY_REFUND.search(text, start, end)
    if refund:
        return {"basis": "fees_paid", "amounts": [], **span(text, refund.start(), refund.end())}
    return None


def periods(text: str, start: int, end: int) -> list[dict[str, Any]]:
    """Durations in the window: ``[{days, text, start, end}]`` (months = 30 days)."""
    out: list[dict[str, Any]] = []
    for m in _PERIOD.finditer(text, start, end):
        if m.group("paren"):
            n = int(m.group("paren"))
        elif m.group("num"):
            n = int(m.group("num"))
        else:
            n = _NUMBER_WORDS.get(re.sub(r"\s+", " ", m.group("word").lower().replace("-", " ")),
                                  _NUMBER_WORDS.get(m.group("word").lower(), 0))
        unit = m.group("unit").lower().rstrip("s")
        days = n * {"day": 1, "week": 7, "month": 30, "year": 365}[unit]
        out.append({"days": days, **span(text, m.start(), m.end())})
    return out


def termination_terms(text: str, start: int, end: int) -> dict[str, Any]:
    """``{for_convenience, for_cause, automatic, notice_period_days, notice}``."""
    window = text[start:end]
    notice = None
    for period in periods(text, start, end):
        tail = text[period["end"]:min(end, period["end"] + 60)]
        if _NOTICE.search(tail) or _NOTICE.search(text[max(start, period["start"] - 40):period["start"]]):
            notice = period
            break
    return {
        "for_convenience": bool(_CONVENIENCE.search(window)),
        "for_cause": bool(_FOR_CAUSE.search(window)),
        "automatic": bool(_AUTOMATIC.search(window)),
        "notice_period_days": notice["days"] if notice else None,
        "notice": notice,
    }


def indemnity_parties(text: str, start: int, end: int) -> dict[str, Any]:
    """Who indemnifies whom: ``{indemnitor, indemnitee, mutual}`` (roles or party names)."""
    window = text[start:end]
    who = _INDEMNITOR.search(window)
    whom = _INDEMNITEE.search(window)
    return {
        "indemnitor": _role(who.group("who")) if who else None,
        "indemnitee": _role(whom.group("whom")) if whom else None,
        "mutual": bool(_MUTUAL.search(window)),
    }


def assignment_terms(text: str, start: int, end: int) -> dict[str, Any]:
    """``{consent_required, change_of_control, restricted}`` for an assignment clause."""
    window = text[start:end]
    return {
        "consent_required": bool(_CONSENT.search(window)),
        "change_of_control": bool(_CHANGE_CONTROL.search(window)),
        "restricted": bool(re.search(r"\b(?:not|no)\b[^.;]{0,60}\b(?:assign|transfer)", window, re.I)),
    }


def _role(raw: str) -> str:
    word = re.sub(r"^the\s+", "", raw.strip(), flags=re.I)
    return _ROLE.get(word.lower(), word)


def _canonical_place(raw: str) -> str:
    raw = " ".join(raw.split())
    for place in _PLACES:
        if place.lower() == raw.lower():
            return place.removeprefix("the ")
    return raw


def _currency(code: str) -> str | None:
    code = code.upper().replace(" ", "")
    if not code:
        return None
    if "$" in code or "DOLLAR" in code or code == "USD":
        return "USD"
    if code.startswith("EUR"):
        return "EUR"
    if code.startswith(("POUND", "GBP")):
        return "GBP"
    return code


_PART_END = re.compile(r";|\.(?=\s+[A-Z\"“(]|\s*$)")


def _part_end(text: str, pos: int, limit: int) -> int:
    """End of the sentence part starting at ``pos`` (next full stop or semicolon).

    An abbreviation's full stop ("ONE HUNDRED U.S. DOLLARS ($100.00)") does not end it.
    """
    for m in _PART_END.finditer(text, pos, limit):
        if m.group() == "." and is_abbreviation(text, m.start()):
            continue
        return m.end() - 1
    return limit
