"""The synthetic form corpus lives in ``bench.corpus`` (the bench ships it); this
name stays so the tests' ``from tests import corpus`` keeps working."""

import sys

from bench import corpus as _corpus

sys.modules[__name__] = _corpus
