"""The tests exercise the *installed* oota-refdev wheel.

`python -m pytest` puts the working directory on sys.path; when that is the
source tree, its torch_refdev/ (no compiled _C) would shadow the installed
package, so drop it from the path.
"""

import os
import sys

_SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

sys.path[:] = [
    entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _SOURCE_ROOT
]
