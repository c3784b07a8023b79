"""Holds SlimWheel.cmake; scikit-build-core finds this folder through the `cmake.root` entry point (slimwheel_ROOT)."""
