"""The planc driver: command line, pipelines, diagnostics and simulation."""

import os

# planc's numpy work is many small matrix products (one per simulated tile). A multithreaded
# BLAS spends more time waking its threads than computing them (4x slower on a 2-core
# machine), so use one thread unless the user chose otherwise. This must happen before numpy
# is first imported, which is why it lives here.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
