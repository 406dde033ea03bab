"""What census said on stderr, less its progress lines: census.render.progress prints one for
work past its quiet seconds (`census: LABEL: STAGE (1.1s)`), which a loaded machine (parallel
test workers) reaches where an idle one does not, so a test of what census says leaves them out."""

from __future__ import annotations

import re

# census.render.progress's line for work past its quiet seconds: `census: LABEL: STAGE (1.1s)`
PROGRESS_LINE = re.compile(r"census: .+: .+ \(\d+\.\ds\)")


def said(stderr: str) -> list[str]:
    """stderr's lines but the progress lines."""
    return [line for line in stderr.splitlines() if not PROGRESS_LINE.fullmatch(line)]
