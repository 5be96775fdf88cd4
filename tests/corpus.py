"""The synthetic form corpus lives in ``overseer.bench.corpus`` (the bench ships it); this
name stays so the tests' ``from tests import corpus`` keeps working."""

import sys

from overseer.bench import corpus as _corpus

sys.modules[__name__] = _corpus
