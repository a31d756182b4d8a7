"""Where the project's ../shared (the spec and the conformance kit) is: beside the repository."""

import os

SHARED = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared"))
