# Replaces faiss 1.7.3's faiss/loader.py in this wheel (faiss/README.md, "Changes").
#
# The original picks between the generic and the AVX2 build of the SWIG module and, to detect AVX2, imports
# distutils (gone from Python 3.12) and numpy.core (numpy 2 renamed it). This wheel ships only the generic module,
# so there is nothing to choose: import it, as the original does when AVX2 is absent.
import logging

logger = logging.getLogger(__name__)

logger.info("Loading faiss.")
from .swigfaiss import *  # noqa: E402,F401,F403  (faiss.X is swigfaiss.X, as in upstream)

logger.info("Successfully loaded faiss.")
