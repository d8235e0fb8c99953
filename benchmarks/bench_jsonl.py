"""The JSON lines of one benchmark family in a benchmark's output, for the plotting and fitting
scripts beside this file (which import it: Python puts a script's own folder on its path). Other
lines (logs, progress, other families) are skipped; a line that starts with "{" but is not JSON
raises, as a truncated result file should.
"""
import json


def family_rows(path, family):
    """Yields each line of `path` that is a JSON object with "family" == family, parsed."""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("family") == family:
                yield r
