"""Inputs that the product's tests and the lab both make: wheels, ELF files, fatbins and zips synthesized byte by
byte, the corpus of real GPU wheels from PyPI, and the faiss recipe's build profiles.

It lives outside tests/ and lab/ so that neither tree reaches into the other: tests/ never imports the lab, and the
lab never puts tests/ on its path (tests/unit/test_layers.py holds both). It imports only slimwheel and the
standard library, and slimwheel never imports it. Both trees reach it from the repository root (pytest's
`pythonpath`; the lab's scripts put the root on sys.path).
"""
