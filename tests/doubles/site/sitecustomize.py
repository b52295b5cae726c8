"""Installs an OS double in a Python process the tests start (the CLI under test), when
CACHEDOCTOR_TEST_DOUBLE names one; see tests/doubles/__init__.py. Only on PYTHONPATH of
those processes; does nothing otherwise."""

import os

if os.environ.get("CACHEDOCTOR_TEST_DOUBLE"):
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    if root not in sys.path:
        sys.path.insert(0, root)
    from tests.doubles import install

    install(os.environ["CACHEDOCTOR_TEST_DOUBLE"], os.environ["CACHEDOCTOR_TEST_DOUBLE_STATE"])
