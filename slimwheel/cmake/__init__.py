"""Holds SlimWheel.cmake; scikit-build-core finds this folder through the `cmake.prefix` entry point."""
