"""``gpuplan ui``: a local web page and a JSON API over :mod:`gpuplan.api` (needs the ``ui`` extra: fastapi)."""
