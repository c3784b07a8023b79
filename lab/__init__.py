"""The lab: measurement harnesses, GPU checks that produce the records in docs/, and their results.

Never imported by the product (slimwheel/) or its tests (tests/): tests/unit/test_layers.py enforces it."""
