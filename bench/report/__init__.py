"""The report: a results file in, a Markdown report with PNG figures out.

The report puts the paper's published tables (:mod:`bench.experiments.paper`)
beside ours, says which optima are proven and which values are only best known,
shows certified gaps only where a solver proved a bound, states its claims with
the counts behind them, and lists every run that crashed, timed out, was refused
or skipped. Experiment settings come from ``manifest.json`` next to the results
file (written by the sweep), else from the shipped experiment files.

- :mod:`bench.report.data`: loading results, the manifest and instances
- :mod:`bench.report.tables`: the pandas frame, group-bys, statistics, Markdown cells
- :mod:`bench.report.sections`: one renderer per experiment kind
- :mod:`bench.report.text`: statements computed from the results, reproduce commands
- :mod:`bench.report.figures`: the PNG figures (matplotlib, Agg)
- :mod:`bench.report.document`: :func:`write_report`, the whole document
- :mod:`bench.report.readme`: the README's Results section, generated
"""

from bench.report.data import load_results
from bench.report.document import write_report
from bench.report.tables import OK, ci95, knee_index

__all__ = ["OK", "ci95", "knee_index", "load_results", "write_report"]
