# ruff: noqa: E501  (patterns read best one per line)
"""The clause types the pipeline looks for, kept as data (seed 004: clause extraction).

Each type has:

* ``query`` / ``retry_query``: BM25 queries over chunks (the second one widens the search);
* ``heading``: a pattern for section headings about the type;
* ``triggers``: precise operative-language patterns; one of them must match the quoted
  sentence for a finding (validation re-checks it);
* ``weak``: looser patterns, accepted on the last search only under a matching heading;
* ``exclude``: patterns that disqualify a sentence (references, survival lists, …);
* ``protective``: whether its absence is itself a risk.

Patterns are case-insensitive unless they start with ``(?-i)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# A window inside one sentence: no full stop or semicolon, except the full stop of a
# company suffix ("OpenVPN Technologies, Inc. be liable", "JGRAPH LTD. OR ITS SUPPLIERS").
_COMPANY_DOT = r"(?:(?<=\bInc)|(?<=\bLtd)|(?<=\bCorp)|(?<=\bCo)|(?<=\bLLC)|(?<=\bPty)|(?<=\bPlc)|(?<=\bGmbH))\."
_ANY = r"(?:[^.;]|" + _COMPANY_DOT + r"){0,%d}?"


def _w(n: int) -> str:
    return _ANY % n


# What a confidentiality duty does with the protected information.
_CI_VERBS = (r"disclos\w*|use[sd]?|using|protect\w*|safeguard\w*|keep|kept|hold|held|maintain\w*|"
             r"return\w*|destroy\w*|reveal\w*|divulg\w*|confidence|secre(?:t|cy)|care|"
             r"recei(?:ve|ved|ving)|means|includes?")
# A licence, an agreement or rights under it; "contract" is the same instrument.
_INSTRUMENT = r"agreement|license|licence|eula|sla|contract"


CLAUSE_TYPES: dict[str, dict[str, Any]] = {
    "governing_law": {
        "label": "Governing law",
        "query": "governed construed laws of the state jurisdiction governing law",
        "retry_query": "laws courts venue jurisdiction conflict of law principles dispute",
        "heading": r"governing\s+law|applicable\s+law|choice\s+of\s+law|jurisdiction|law\s+and\s+venue",
        "triggers": [
            # "laws of" may follow emphasis marks ("governed by the _Law of England and Wales_").
            rf"\b(?:governed|construed|interpreted|enforced|controlled)\b{_w(120)}\b(?:by|under|in\s+accordance\s+with|pursuant\s+to)\b{_w(60)}(?:(?<![A-Za-z])laws?\s+(?:of|in\s+force)\b|(?-i:\b[A-Z][A-Za-z]+(?:\s+[A-Z][A-Za-z]+)?\s+law\b))",
            # The window takes a parenthesis ("the laws of the state where you live
            # (or, if a business, where your principal place of business is located) govern
            # all claims").
            rf"\blaws?\s+of\b{_w(160)}\b(?:shall\s+|will\s+)?(?:govern|governs|apply|applies|control|controls)\s+(?:this|these|the|all|any)\b",
            r"\b(?:English|Irish|Swiss|German|French|Dutch|Swedish|Finnish|Norwegian|Danish|Japanese|Israeli|Singapore|Scots|Austrian|Italian|Spanish|Belgian)\s+law\s+(?:shall|will|governs|applies)\b",
            r"\bgoverning\s+law\b[^.;]{0,40}\b(?:is|shall\s+be|will\s+be)\b[^.;]{0,20}\blaws?\b",
            # "Any and all disputes arising from ... this contract ... are exclusively
            # subject to the law of the Federal Republic of Germany" (no "governed").
            rf"\b(?:disputes?|claims?|controvers(?:y|ies))\b{_w(200)}\b(?:are|is|shall\s+be|will\s+be)\s+(?:\w+\s+)?subject\s+to\s+the\s+laws?\s+of\b",
        ],
        "weak": [r"\blaws?\s+of\s+(?:the\s+)?(?:state|commonwealth|province|republic|kingdom)\s+of\b"],
        "exclude": [r"\bexport\b", r"\bsurviv", r"\bprivacy\s+laws?\b"],
        "protective": True,
    },
    "limitation_of_liability": {
        "label": "Limitation of liability",
        "query": "limitation of liability in no event liable damages aggregate liability exceed",
        "retry_query": "consequential incidental indirect damages lost profits liability limited amount paid",
        "heading": r"limitation\s+of\s+liability|limitations?\s+of\s+(?:damages|remedies)|liability|exclusion\s+of\s+(?:damages|liability)",
        "triggers": [
            rf"\b(?:in\s+no\s+event|under\s+no\s+circumstances?|in\s+no\s+case)\b{_w(250)}\b(?:liable|liability|responsible)\b",
            rf"\b(?:total|aggregate|cumulative|entire|maximum|sole)\b{_w(80)}\bliabilit(?:y|ies)\b{_w(250)}\b(?:not\s+exceed|shall\s+not\s+exceed|will\s+not\s+exceed|limited\s+to|exceed|not\s+to\s+exceed)\b",
            rf"\bliabilit(?:y|ies)\b{_w(120)}\b(?:shall|will|is|are)\s+(?:be\s+)?limited\s+to\b",
            # "we will only be liable to you up to a maximum total limit of …"
            rf"\bbe\s+(?:held\s+)?liable\b{_w(100)}\b(?:up\s+to|to\s+a\s+maximum|not\s+(?:to\s+)?exceed(?:ing)?)\b",
            rf"\b(?:shall|will|does|do)\s+not\s+(?:\w+\s+){{0,4}}?be\s+(?:held\s+)?(?:responsible\s+or\s+)?liable\b{_w(300)}\b(?:damages?|indirect|incidental|special|consequential|punitive|exemplary|lost\s+profits?|loss\s+of\s+(?:profits?|data|revenue|use|business))\b",
            rf"\bneither\b{_w(120)}\b(?:shall|will)\s+(?:\w+\s+){{0,3}}?be\s+(?:held\s+)?liable\b",
            r"\b(?:shall|will)\s+have\s+no\s+(?:\w+\s+){0,2}?liability\b",
            rf"\b(?:not|never)\s+be\s+(?:held\s+)?liable\s+(?:to\s+\w+\s+)?for\s+any\b{_w(200)}\bdamages?\b",
            rf"\bdisclaims?\b{_w(80)}\bliabilit(?:y|ies)\b{_w(200)}\bdamages?\b",
        ],
        "weak": [r"\blimitation\s+of\s+liability\b", r"\bnot\s+(?:be\s+)?liable\b"],
        "exclude": [r"\bsurviv", r"\bindemnif\w*\b(?![^.]*\bin\s+no\s+event\b)"],
        "protective": True,
    },
    "indemnification": {
        "label": "Indemnification",
        "query": "indemnify defend hold harmless claims losses indemnification",
        "retry_query": "indemnity third party claims attorneys fees defend settle",
        "heading": r"indemnif|indemnity|hold\s+harmless",
        "triggers": [
            rf"\b(?:shall|will|agrees?|must|undertakes?|hereby\s+agrees?)\b{_w(80)}\b(?:indemnify|indemnity|defend\s+and\s+indemnify)\b",
            rf"\bindemnif(?:y|ies|ied|ying)\b{_w(150)}\b(?:hold\s+(?:\w+\s+){{0,6}}harmless|defend)\b",
            rf"\b(?:defend|hold\s+(?:\w+\s+){{0,6}}harmless)\b{_w(120)}\bindemnif",
            rf"\b(?:you|licensee|customer|user|recipient|developer|distributor|licensor|company)\b{_w(40)}\bindemnify\b",
            # A duty to defend named by what it covers, without "indemnify": "will be
            # solely responsible for the investigation, defense, settlement and discharge of
            # any such ... claim".
            rf"\b(?:will|shall|is|are)\s+(?:be\s+)?(?:solely\s+|fully\s+|exclusively\s+)?responsible\s+for\s+(?:the\s+)?(?:[\w-]+,?\s+(?:and\s+)?){{0,2}}?defen[cs]e\b{_w(120)}\bclaims?\b",
            # A duty to defend without "indemnify": "HPE will defend and/or settle
            # any claims against you", "We will defend you against any claims".
            rf"\b(?:shall|will|agrees?\s+to|must|undertakes?\s+to)\s+(?:(?!not\b|never\b)\w+\s+){{0,2}}?defend\b{_w(80)}\b(?:claims?|suits?|actions?|proceedings?)\b",
        ],
        "weak": [r"\bindemnif\w*\b", r"\bhold\s+(?:\w+\s+){0,6}harmless\b"],
        "exclude": [r"\bsurviv", r"\bno\s+(?:obligation\s+to\s+)?indemnif", r"\bno\s+obligation\s+to\s+defend\b"],
        "protective": True,
    },
    "termination": {
        "label": "Termination",
        "query": "termination terminate this agreement notice breach effective until terminated",
        "retry_query": "terminate immediately automatically fail to comply cease use destroy copies",
        "heading": r"terminat|term\s+and\s+termination|^\W*term\b",
        "triggers": [
            rf"\b(?:may|can|shall|will|right\s+to)\s+(?:\w+,?\s+){{0,4}}terminat(?:e|ed)\b{_w(200)}\b(?:agreement|license|licence|eula|terms|contract|subscription|rights?|access|use)\b",
            rf"\b(?:agreement|license|licence|eula|terms|contract|rights?\s+granted)\b{_w(120)}\b(?:will|shall|may)\s+(?:\w+\s+){{0,3}}terminate\b",
            rf"\b(?:agreement|license|licence|eula)\b{_w(60)}\b(?:is|remains?)\s+(?:in\s+force\s+|effective\s+)+until\s+terminated\b",
            rf"\bterminat(?:es|ed|ion)\b{_w(100)}\b(?:automatically|immediately|without\s+notice|upon\s+(?:written\s+)?notice|if\s+you\s+fail|breach)\b",
            rf"\bupon\s+(?:any\s+)?(?:the\s+)?(?:termination|expiration)\b{_w(120)}\b(?:shall|must|will)\b",
            # Ending the service for the user's breach is termination in all but name.
            rf"\b(?:may|will|can|reserves?\s+the\s+right\s+to)\s+(?:\w+\s+or\s+)?(?:suspend|stop|cease|discontinue)\s+(?:providing|your\s+access|access|the\s+services?|your\s+(?:use|account))\b{_w(120)}\bif\s+you\b{_w(40)}\b(?:not|fail|breach|violate)",
            # The cue before the noun ("immediate and automatic termination of this license")
            # and a permission that lapses or expires on its own ("the allowance lapses
            # immediately and automatically").
            r"\b(?:immediate|automatic)\s+(?:and\s+(?:immediate|automatic)\s+)?termination\s+of\s+(?:this|the|your|such|any)\b",
            r"\b(?:lapse|expire)[sd]?\s+(?:\w+\s+){0,2}?(?:immediately|automatically)\b|\b(?:immediately|automatically)\s+(?:lapse|expire)[sd]?\b",
            # A licence (key) revoked or expired ends the right to use.
            rf"\b(?:licen[sc]es?|licen[sc]e\s+keys?|rights?)\b{_w(80)}\b(?:subject\s+to\s+revocation|(?:be|is|are|been)\s+(?:\w+\s+){{0,2}}?revoked)\b",
            rf"\blicen[sc]e\s+keys?\b{_w(40)}\b(?:expires?|expired|becomes?\s+invalid)\b",
            # A right to terminate with words between "right" and "to" ("has the right, in
            # addition and without prejudice to any other rights or remedies, to terminate
            # this Agreement immediately").
            rf"\bright\b{_w(120)}\bto\s+terminate\s+(?:this|the|these|your|its)\s+(?:{_INSTRUMENT}|terms|subscription|rights?|access)\b",
        ],
        "weak": [r"\bterminat\w+\b"],
        "exclude": [r"\bsurvive[sd]?\s+(?:any\s+)?(?:the\s+)?(?:termination|expiration)\b"],
        "protective": True,
    },
    "warranty_disclaimer": {
        "label": "Warranty disclaimer",
        "query": "as is without warranty of any kind disclaims warranties merchantability fitness",
        "retry_query": "no warranties express implied non-infringement accuracy error free",
        "heading": r"warrant|disclaim",
        "triggers": [
            r"(?-i:\bAS[\s-]+IS\b)",
            r"[\"“'‘]\s*as[\s-]+is\s*[\"”'’]",
            r"\bon\s+an?\s+[\"“']?as[\s-]+is\b",
            rf"\bdisclaim(?:s|ed|er)?\b{_w(200)}\bwarrant(?:y|ies)\b",
            rf"\bwithout\s+(?:any\s+)?(?:warranty|warranties)\b{_w(60)}\b(?:of\s+any\s+kind|express|implied|whatsoever)\b",
            r"\b(?:makes?|gives?|provides?)\s+no\s+(?:\w+\s+){0,4}(?:warranty|warranties|representations?)\b",
            r"\bmerchantability\b",
            r"\bfitness\s+for\s+(?:a\s+)?particular\s+purpose\b",
        ],
        "weak": [r"\bno\s+warrant(?:y|ies)\b"],
        "exclude": [r"\bsurviv"],
        "protective": False,
    },
    "confidentiality": {
        "label": "Confidentiality",
        "query": "confidential information confidentiality disclose non-disclosure secret",
        "retry_query": "proprietary information keep secret not disclose third party protect trade secrets",
        "heading": r"confidential|non-?disclosure",
        "triggers": [
            rf"\b(?:keep|hold|maintain|treat|protect|preserve)\b{_w(200)}\b(?:in\s+(?:strict\s+)?confidence|confidential(?:ity)?|secret)\b",
            r"\b(?:insure|ensure|maintain|preserve|protect)\s+(?:its|their|the|such)\s+confidentiality\b",
            rf"\bdisclosed\b{_w(80)}\bto\s+any\s+(?:third[\s-]+part|other\s+person)",
            rf"\b(?:shall|will|must|may)\s+not\s+(?:\w+\s+){{0,4}}disclose\b{_w(150)}\b(?:confidential|proprietary|information|third[\s-]+part)",
            rf"\b(?:not|never)\s+(?:to\s+)?disclose\b{_w(120)}\b(?:confidential|proprietary|information)\b",
            # The defined term alone is not a duty ("export of … Confidential Information
            # is subject to export laws"): it must come with something done to it.
            rf"(?-i:\bConfidential\s+Information\b)(?i:{_w(200)}\b(?:{_CI_VERBS})\b)",
            rf"(?i:\b(?:{_CI_VERBS})\b{_w(200)})(?-i:\bConfidential\s+Information\b)",
            r"\bconfidentiality\s+(?:obligations?|agreement|terms?|restrictions?)\b",
            r"\bnon-?disclosure\s+(?:agreement|obligations?)\b",
            # "(not) disclose … without (prior written) consent": a non-disclosure duty,
            # whatever is protected (terms, the software); "publish" alone is publicity.
            rf"\b(?:disclose|divulge|reveal)\b{_w(150)}\bwithout\b{_w(60)}\b(?:consent|permission|approval|authori[sz]ation)\b",
            rf"\b(?:disclose|publish|divulge|reveal)\b{_w(60)}\bresults?\s+of\b{_w(60)}\b(?:benchmark(?:s|ing)?|performance)\b",
        ],
        # Under a "Confidentiality" heading, a duty to prevent unauthorised access
        # counts without the word ("… to prevent unauthorized access to the Font Software").
        "weak": [r"\bconfidential\w*\b", r"\bprevent\s+(?:any\s+)?unauthori[sz]ed\s+(?:access|disclosure)\b"],
        "exclude": [r"\bsurviv", r"\bno\s+(?:\w+\s+)?confidentiality\s+obligations?\b",
                    r"\bpasswords?\b|\bcredentials?\b|\bpersonally\s+identif",
                    r"\bnon-?confidential\b",
                    r"\bnot\s+(?:be\s+)?(?:considered|treated\s+as|deemed)\s+(?:\w+\s+)?confidential\b",
                    # Saying what is Confidential Information ("the Software (i) is the
                    # Confidential Information of WinZip") protects nothing unless the sentence
                    # also imposes a duty (disclose, protect, keep, "remain confidential", …).
                    r"(?s)\A(?!.*\b(?:disclos|protect|safeguard|keep|kept|hold|held|maintain|return|destroy|reveal|divulg|confidence|secre|treat|not\s+use|not\s+to\s+use|restrict)\w*)(?!.*\bconfidential(?!\s+information)\b).*\b(?:is|are|constitutes?|remains?)\s+(?:the\s+)?(?:\w+\s+){0,2}?(?-i:Confidential\s+Information)\b"],
        "protective": True,
    },
    "assignment": {
        "label": "Assignment",
        "query": "assign transfer this agreement rights obligations consent assignment",
        "retry_query": "change of control merger acquisition successor assigns delegate",
        "heading": r"assign|transfer",
        "triggers": [
            rf"(?<!non-)(?<!non)\bassign(?:ment|ed|s)?\b{_w(120)}\b(?:{_INSTRUMENT}|rights?|obligations?|interests?)\b",
            rf"\b(?:{_INSTRUMENT}|rights?|obligations?)\b{_w(100)}(?<!non-)(?<!non)\b(?:assign|assigned|assignable|assignment)\b",
            rf"\b(?:may\s+not|shall\s+not|will\s+not|cannot|must\s+not|not)\s+(?:\w+\s+){{0,4}}transfer\b{_w(60)}\b(?:rights?|license|licence)\s+(?:under|granted|to)\b",
            # The licence may be named through the product ("transfer the Software
            # Product License to …", "transfer all of your rights under this EULA").
            rf"\b(?:may|can)\s+(?:permanently\s+)?transfer\s+(?:this|the|your|all\s+(?:of\s+)?your)\s+(?:[\w-]+\s+){{0,3}}?(?:{_INSTRUMENT}|rights)\b",
            rf"\b(?:may\s+not|shall\s+not|will\s+not|cannot|must\s+not|not)\s+(?:\w+\s+){{0,4}}transfer\b{_w(40)}\b(?:this|the|these|its|your)\s+(?:{_INSTRUMENT}|rights|terms)\b",
            # "a one-time permanent transfer of this EULA and Software"
            rf"\bpermanent(?:ly)?\s+(?:\w+\s+){{0,2}}?transfer(?:s|red)?\b{_w(80)}\b(?:{_INSTRUMENT}|rights?)\b",
            r"\bchange\s+(?:of|in)\s+control\b",
            # A licence transfer named by what goes with it: "transfer all your license
            # rights", "transfer the Software ... on a permanent basis", a transfer on
            # condition that the recipient (other party) agrees to the terms.
            rf"\btransfer\s+(?:all\s+(?:of\s+)?)?(?:your|its|their)\s+(?:[\w-]+\s+){{0,2}}?(?:rights|{_INSTRUMENT})\b",
            rf"\btransfer\w*\b{_w(80)}\bon\s+a\s+permanent\s+basis\b",
            # "transfer subject to ...'s license transfer authorization, all Your EULA": the
            # object after a qualifying phrase.
            rf"\b(?:may|can),?\s+(?:\w+,?\s+){{0,2}}?transfer\b{_w(100)}\ball\s+(?:of\s+)?your\s+(?:[\w-]+\s+){{0,2}}?(?:rights|{_INSTRUMENT})\b",
            rf"\btransfer\w*\b{_w(250)}\b(?:recipient|transferee|other\s+party|new\s+(?:user|owner|licensee))\b{_w(40)}\b(?:agrees?|accepts?)\b",
            # "Transferring the license to a third party is ... not permitted";
            # "... or transfer the Software or these Terms to any third party".
            rf"\b(?:transferr?ing|assigning)\s+(?:this|the|these|your)\s+(?:{_INSTRUMENT}|rights|terms)\b",
            rf"\btransfer\b{_w(30)}\b(?:this|these)\s+(?:{_INSTRUMENT}|terms)\s+to\s+(?:any\s+|a\s+|another\s+)?(?:third|other)\b",
        ],
        "weak": [r"\bassign\w*\b", r"\bsuccessors?\s+and\s+(?:permitted\s+)?assigns\b"],
        "exclude": [r"\bsurviv", r"\bassigned\s+(?:to\s+)?(?:a\s+)?(?:value|number|name|id)\b",
                    r"\bassign\w*\b[^.;]{0,60}\bright,?\s+title,?\s+and\s+interest",
                    # An assignment of IP ("hereby assigns to JSG joint ownership in ... the
                    # copyrights") is not an assignment of the agreement.
                    r"\bhereby\s+assigns?\b[^.;]{0,80}\b(?:ownership|copyrights?|patents?|intellectual\s+property)\b",
                    r"\bassigned\s+to\s+you\b"],
        "protective": False,
    },
    "auto_renewal": {
        "label": "Automatic renewal",
        "query": "automatically renew renewal term successive periods unless notice non-renewal",
        "retry_query": "renewal subscription term extend additional periods evergreen",
        "heading": r"renew",
        "triggers": [
            r"\b(?:automatic(?:ally)?|auto)[\s-]*renew\w*\b",
            # The term "shall be automatically extended to one or more Renewal Term(s)", "will
            # automatically be renewed", "is renewed automatically".
            r"\bautomatically\s+(?:be\s+)?(?:extended|renewed|prolonged)\b|\b(?:extended|renewed|prolonged)\s+automatically\b",
            rf"\brenew(?:s|ed|al)?\b{_w(100)}\b(?:successive|additional|further|consecutive)\s+(?:\w+\s+){{0,3}}(?:periods?|terms?|years?|months?)\b",
            rf"\b(?:successive|additional|consecutive)\s+(?:\w+\s+){{0,3}}(?:renewal\s+)?(?:periods?|terms?)\b{_w(100)}\brenew",
            r"\bevergreen\b",
        ],
        "weak": [],
        # A renewal someone may ask for ("This Agreement can be renewed …", "Licensee may
        # renew …") is not automatic unless the sentence says so.
        "exclude": [r"\bsurviv",
                    r"^(?![\s\S]*\bautomatic)[\s\S]*\b(?:may|can|could)\s+(?:be\s+)?renew"],
        "protective": False,
    },
    "audit_rights": {
        "label": "Audit rights",
        "query": "audit inspect records books verify compliance audit rights",
        "retry_query": "inspection records premises verification usage reports certify compliance",
        "heading": r"audit|inspection|records|verification",
        "triggers": [
            rf"\b(?:audit|inspect)(?:s|ed|ing|ion)?\b{_w(200)}\b(?:records|books|premises|facilities|systems|compliance|usage|use\s+of|accounts)\b",
            rf"\b(?:records|books|accounts)\b{_w(200)}\b(?:audit|inspection|inspect|examination|verify|verification)\b",
            r"\bright\s+to\s+(?:audit|inspect|verify)\b",
            rf"\bverify\b{_w(60)}\bcompliance\b",
            rf"\b(?:certify|certification)\b{_w(80)}\b(?:in\s+)?(?:writing|compliance)\b{_w(80)}\b(?:compliance|agreement|terms)\b",
        ],
        "weak": [r"\baudit\w*\b"],
        "exclude": [r"\bsurviv", r"\baudit\s+(?:logs?|trails?)\b",
                    # A privacy notice's purposes for collected data ("may use the information
                    # collected ... to verify compliance with" the agreement) grant no audit.
                    r"\buse\s+(?:the\s+|such\s+|this\s+)?(?:information|data)\s+(?:(?:we|it|they)\s+)?collect(?:ed|s)?\b"],
        "protective": False,
    },
    "license_restrictions": {
        "label": "License restrictions",
        "query": "shall not reverse engineer decompile disassemble modify sublicense rent lease restrictions",
        "retry_query": "except as expressly permitted you may not copy distribute sell transfer derivative works",
        "heading": r"restrict|limitations\s+on\s+use|prohibit|you\s+may\s+not|conditions\s+of\s+use",
        "triggers": [
            r"\b(?:shall|may|will|must|can|agrees?\s+to|agree\s+not\s+to)\s*(?:not|never)\b[^.]{0,400}?\b(?<!without\sa\s)(?<!without\san\s)(?<!without\sany\s)(?:reverse[\s-]+engineer\w*|decompil\w+|disassembl\w+|sub-?licen[sc]\w*|rent|lease|lend|modify|adapt|translate|copy|reproduce|distribute|redistribute|sell|resell|derivative\s+works?|remove|alter|obscure|circumvent|combine|make\s+copies|incorporate)\b",
            r"\b(?:not\s+to|you\s+(?:may|shall|will)\s+not|licensee\s+(?:may|shall|will)\s+not)\b[^.]{0,400}?\b(?<!without\sa\s)(?<!without\san\s)(?<!without\sany\s)(?:reverse[\s-]+engineer\w*|decompil\w+|disassembl\w+|sub-?licen[sc]\w*|rent|lease|modify|copy|distribute|sell)\b",
            rf"\b(?:no|any)\s+(?:right|license|licence)\s+to\b{_w(100)}\b(?:reverse[\s-]+engineer\w*|decompil\w+|disassembl\w+|sublicen[sc]\w*|modify|distribute)\b",
            rf"\b(?:reverse[\s-]+engineer\w*|decompil\w+|disassembl\w+)\b{_w(150)}\b(?:prohibited|not\s+permitted|is\s+not\s+allowed|except|unless)\b",
            rf"\bexcept\s+as\s+(?:expressly\s+|otherwise\s+|specifically\s+)*(?:permitted|provided|authori[sz]ed|set\s+forth|stated)\b{_w(150)}\b(?:may\s+not|shall\s+not|will\s+not|not)\b",
            # Limits of the grant without "may not": a use that needs a further approval or
            # licence ("Commercial Use ... requires a signed approval"), a grant that "does not
            # apply to" a use.
            rf"\b(?:use|usage|distribution|redistribution|installation|deployment)\b{_w(80)}\brequires?\s+(?:a\s+|an\s+|the\s+)?(?:separate\s+|signed\s+|written\s+|prior\s+|express\s+|additional\s+|commercial\s+)*(?:approval|licen[sc]e|consent|agreement|permission)\b",
            rf"\b(?:grant|licen[sc]e)\b{_w(30)}\b(?:explicitly\s+|expressly\s+)?does\s+not\s+(?:apply|extend)\s+to\s+(?:any\s+)?(?:[\w-]+\s+){{0,2}}?(?:use|usage|distribution|redistribution|deployment)\b",
        ],
        "weak": [r"\brestrictions?\b", r"\bprohibited\b"],
        "exclude": [r"\bsurviv",
                    # Assigning the instrument itself is assignment, not a use restriction
                    # ("This agreement and licenses granted by it may not be assigned,
                    # sublicensed, or otherwise transferred"), unless a use is prohibited too.
                    rf"(?s)\A(?!.*\b(?:reverse|decompil|disassembl|modif|cop(?:y|ies)|rent|lease|lend|distribut|sell|resell)\w*).*?\b(?:{_INSTRUMENT})s?\b{_w(60)}\b(?:may|shall|will|must|can)\s*not\s+be\s+(?:\w+,?\s+(?:or\s+|and\s+)?){{0,3}}?(?:assigned|transferred)\b",
                    # ... and its active voice: "You may not assign, sublicense, sub-contract,
                    # or otherwise transfer this Agreement, or any rights or obligations under it".
                    rf"(?s)\A(?!.*\b(?:reverse|decompil|disassembl|modif|cop(?:y|ies)|rent|lease|lend|distribut|sell|resell)\w*).*?\b(?:may|shall|will|must|can)\s*not\s+(?:[\w-]+,?\s+(?:or\s+|and\s+)?){{0,5}}?(?:assign|transfer)\b(?:,?\s+(?:or\s+|and\s+)?[\w-]+){{0,5}}?\s+(?:this|the|these)\s+(?:{_INSTRUMENT}|terms)\b",
                    # A scope statement ("TSIMS shall not include ... modifications required
                    # to adapt products") prohibits nothing; "does not include the right to
                    # sublicense" does.
                    r"\b(?:shall|will|does|do)\s+not\s+include\b(?![^.;]{0,40}\b(?:right|rights|licen[sc]e|permission)\b)",
                    # A definition prohibits nothing ('"Personal or Internal Business
                    # Use" shall mean ... and shall not mean any distribution'), and a covenant
                    # not to sue ("you will not bring any claim for infringement") is not a
                    # restriction on use.
                    r"\A\W*[\"“][^\"”]{1,80}[\"”]\s+(?:shall\s+)?(?:means?|refers?\s+to)\b",
                    r"\bnot\s+(?:to\s+)?(?:bring|assert|file|institute)\s+(?:any\s+)?(?:claims?|actions?|suits?|lawsuits?|proceedings?)\b"],
        "protective": False,
    },
}
"""Clause types in report order."""

CLAUSE_TYPE_NAMES: tuple[str, ...] = tuple(CLAUSE_TYPES)


@dataclass(frozen=True)
class ClauseSpec:
    """A compiled :data:`CLAUSE_TYPES` entry."""

    name: str
    label: str
    query: str
    retry_query: str
    heading: re.Pattern[str]
    triggers: tuple[re.Pattern[str], ...]
    weak: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]
    protective: bool


def _compile(pattern: str) -> re.Pattern[str]:
    if pattern.startswith("(?-i:"):
        return re.compile(pattern)
    return re.compile(pattern, re.IGNORECASE)


def compiled_specs() -> dict[str, ClauseSpec]:
    """Every clause type compiled once (module cache)."""
    if not _CACHE:
        for name, raw in CLAUSE_TYPES.items():
            _CACHE[name] = ClauseSpec(
                name=name, label=raw["label"], query=raw["query"], retry_query=raw["retry_query"],
                heading=re.compile(raw["heading"], re.IGNORECASE),
                triggers=tuple(_compile(p) for p in raw["triggers"]),
                weak=tuple(_compile(p) for p in raw["weak"]),
                exclude=tuple(_compile(p) for p in raw["exclude"]),
                protective=bool(raw["protective"]),
            )
    return _CACHE


_CACHE: dict[str, ClauseSpec] = {}
