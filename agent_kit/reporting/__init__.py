"""After a run (tooling half): store → summary, MTRL metrics, pricing, HTML report and its plots.

``metrics`` computes group advantages, pass@k and token counts; ``pricing`` turns tokens into a
cost estimate; ``summary`` reads a run store into ``summary.json``; ``report`` renders the
self-contained ``report.html`` with the inline SVG plots of ``svg``.
"""
