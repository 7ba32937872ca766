"""A map that patches cowcheck at import so that nothing can fail (issue 24): the checker and
the checked must not share a process.

Its ``get`` always returns None, which the model's P1 catches at the first read
of a key it holds; but importing this module replaces ``HarnessBase._fail`` and
``Harness._expect_equal`` with functions that do nothing. With the map in
cowcheck's own process (``--in-process``) that silences every check and the run
"passes"; run as cowcheck runs a user's map by default, the module is imported
in the map's own process only, the checker's harness is untouched, and the run
fails with DIVERGENCE P1.

Unlike the rest of the zoo it imports cowcheck: that is its point.
"""

import copy

import cowcheck.core.harness
import cowcheck.map.harness
from tiny import TinyMap

cowcheck.core.harness.HarnessBase._fail = lambda self, *args, **kwargs: None
cowcheck.map.harness.Harness._expect_equal = lambda self, *args, **kwargs: None


class ForgetfulMap(TinyMap):
    def get(self, key, namespace):
        return None


def make_map(capacity=128, state_copier=copy.deepcopy):
    return ForgetfulMap(capacity, state_copier)
