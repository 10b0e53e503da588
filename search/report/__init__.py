"""cutegen.search.report: what people read back from a run, rebuilt from the store.

Above the search and the store, below the CLI; nothing in the search imports it.

* :mod:`.data`: a run gathered into frozen records (:func:`build_run_report`), no HTML;
* :mod:`.html` and :mod:`.svg`: the self-contained HTML page of ``cutegen report``
  (:func:`write_report`);
* :mod:`.export`: a stored candidate as a drop-in module (``cutegen export``);
* :mod:`.graph`: the search tree as a networkx graph, the path to a node;
* :mod:`.bench` and :mod:`.bench_table`: one benchmark task's result read from the store,
  the means, ``BENCHMARKS.md`` and ``bench.json`` (``cutegen bench``).
"""

from cutegen.search.report.data import RunReport, build_run_report
from cutegen.search.report.export import export_candidate, write_export
from cutegen.search.report.html import render_html, write_report

__all__ = [
    "RunReport",
    "build_run_report",
    "export_candidate",
    "render_html",
    "write_export",
    "write_report",
]
