"""slimwheel: slim, correct CUDA wheels."""

__version__ = "0.1.0"
