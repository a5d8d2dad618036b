"""`python -m kubectl_gpu.agent`: the node agent (see kubectl_gpu.agent)."""

from __future__ import annotations

import sys

from kubectl_gpu.agent import main

sys.exit(main())
