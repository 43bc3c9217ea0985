"""Helpers for testing hypaware and plugins written against it.

The conformance suite and peers need pytest and hypothesis: install the
``testing`` extra, ``pip install 'hypaware[testing]'``.
"""
